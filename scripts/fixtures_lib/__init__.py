"""Building blocks of the fixture generators (scripts/make_*.py), which write tests/fixtures/.

`generators` lists every generator and what it writes (scripts/regenerate_fixtures.py runs
them); `driver` is the one driver of the families written as specs (the zoo of
make_fixtures.py, the library models of make_library_fixtures.py): seeds, TorchScript, exports,
manifest entries, planted faults, checks. `models`, `library_models` and `value_kinds` define
the networks, `export` turns one into model.pt / model.onnx / inputs.npz (and is reused by
other export helpers), `faults` plants known errors in exported ONNX files, `verify` checks a
fixture numerically with ONNX Runtime against TorchScript, `manifest` holds what every fixture
folder and manifest entry share, `hostile` and `calibrate` serve one family each.

The generators run as scripts (`.venv/bin/python scripts/make_fixtures.py`), so Python puts
scripts/ first on the import path and `import fixtures_lib` works without path edits; from
anywhere else, `PYTHONPATH=scripts`.
"""
