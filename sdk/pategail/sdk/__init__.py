"""The on-device SDK: what a phone runs. Imports numpy, onnxruntime and cryptography only — never torch,
never the server."""
