"""Helpers of the test suite: paths to the shared data, real servers, record backends, scripted models."""
