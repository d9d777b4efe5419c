"""What the fixture generators share about writing a fixture folder and its manifest entry.

Responsible for: a fresh, empty folder per fixture, its size on disk, the skeleton of a
manifest entry (the fields the Rust tests read, filled in later from the written files), and
the one line that says why an export failed.
"""

import os
import shutil


def fresh_folder(root, name):
    """`root/name`, emptied: a fixture folder holds only what this run wrote."""
    path = os.path.join(root, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def folder_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def first_line(err):
    """One line saying why an export failed.

    Why: the dynamo exporter wraps the real error in a multi-paragraph banner ("Failed to
    export the model with torch.export ... Next steps"); the cause is chained as __cause__
    and summarised after "## Exception summary".
    """
    cause = err.__cause__ or err
    text = [l.strip() for l in str(cause).strip().splitlines() if l.strip()]
    line = text[0] if text else repr(cause)
    return f"{type(cause).__name__}: {line}"[:300]


def entry(name, exporter, spec, **kw):
    """A manifest entry with every field present; `describe` fills in the rest."""
    e = {"name": name, "exporter": exporter, "opset": None,
         "scripted": bool(spec.get("scripted")), "inputs": [], "outputs": [],
         "exercises": list(spec["exercises"]), "expected_modules": [], "fault": None,
         "notes": spec["notes"], "export_error": None}
    e.update(kw)
    return e
