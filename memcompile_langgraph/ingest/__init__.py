"""The build plane's input side: turns as handed over, validated and placed, read from files, packetized and
extracted (Algorithm 1, lines 1-10)."""
