"""The dense channel's sentence embeddings: all-MiniLM-L6-v2 on onnxruntime, offline, and its int8 build."""
