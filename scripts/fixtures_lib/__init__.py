"""Building blocks for scripts/make_fixtures.py, the regenerator of align-check's test model zoo.

`models` defines the small PyTorch networks, `export` turns one into model.pt / model.onnx /
inputs.npz (and is reused by other export helpers), `faults` plants known errors in exported
ONNX files, and `verify` checks every fixture numerically with ONNX Runtime against TorchScript.
"""
