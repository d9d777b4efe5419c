"""The registry sweep (issue #18): builds hundreds of real exported TorchScript/ONNX pairs from
the model registries of timm, torchvision, transformers, Ultralytics and facenet-pytorch, checks
each with align-check, injects faults into the clean ones and reports what the tool got right.

One module per job: `registries` (which models), `calibration` (trained-like statistics and
inputs), `build` (constructing one model), `export` (the child process that writes a model's
files), `variants` (the steps users apply after export), `faults` (mutated ONNX files and their
expected culprits), `check` (running the binary), `cache` (where everything lives),
`causes` (grouping what went wrong), `report` (reports/sweep.md and reports/sweep.json).
The command line is scripts/sweep.py; docs/sweep.md says how to use it.
"""
