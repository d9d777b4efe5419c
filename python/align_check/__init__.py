"""align-check as installed from its wheel: the `align-check` launcher (`__main__`, which finds
libtorch in the installed torch package and ONNX Runtime in onnxruntime, then runs the Rust
binary in `bin/`) and the export helper (`python -m align_check.export`).

Nothing here is imported by a check: the comparison itself is the binary's. Importing this
package imports neither torch nor onnxruntime.
"""
