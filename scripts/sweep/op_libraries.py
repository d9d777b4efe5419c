"""The custom-op library a refused TorchScript model needs, found as a user would find it.

align-check refuses a TorchScript model that calls an operator libtorch does not have
("it calls the operator `ns::op`, which is not registered: ... pass --torch-ops LIB"). A user
follows that advice with the shared library of the package that defines the namespace; the
sweep does the same, so that a detector calling `ns::nms` is measured instead of counted as a
refusal. The library is the shared object in the Python package `ns` whose bytes contain the
operator's schema (`ns::op(`): what registers the op, whatever the file is called.

Such a library is built against the Python wheel of torch, so it also needs that wheel's
libraries on the search path and, when it links libtorch_python, libpython loaded first: the
environment returned with it says so.
"""

import functools
import glob
import importlib.util
import os
import re
import sysconfig

REFUSAL = re.compile(r"calls the operator `([A-Za-z_][\w]*)::([\w.]+)`, which is not registered")


def refused_operator(stderr_lines):
    """(namespace, op) of a refusal for an unregistered operator, or None."""
    for line in stderr_lines:
        match = REFUSAL.search(line)
        if match:
            return match.group(1), match.group(2)
    return None


@functools.lru_cache(maxsize=None)
def library_for(namespace, op):
    """(path, environment additions) of the library that registers `namespace::op`, or None."""
    spec = importlib.util.find_spec(namespace)
    if spec is None or not spec.submodule_search_locations:
        return None
    package = list(spec.submodule_search_locations)[0]
    needle = f"{namespace}::{op}(".encode()
    for path in sorted(glob.glob(os.path.join(package, "**", "*.so"), recursive=True)):
        with open(path, "rb") as f:
            if needle in f.read():
                return path, _environment(path)
    return None


def _environment(library):
    """LD_LIBRARY_PATH with the torch wheel's libraries (and the wheels they load), LD_PRELOAD
    with libpython when the library links libtorch_python (which expects Python's symbols)."""
    site = os.path.dirname(os.path.dirname(library))
    while site and not os.path.isdir(os.path.join(site, "torch", "lib")):
        parent = os.path.dirname(site)
        if parent == site:
            return {}
        site = parent
    dirs = [os.path.join(site, "torch", "lib")] + sorted(glob.glob(os.path.join(site, "nvidia",
                                                                              "*", "lib")))
    env = {"LD_LIBRARY_PATH": ":".join(dirs + [os.environ.get("LD_LIBRARY_PATH", "")])}
    with open(library, "rb") as f:
        links_python = b"libtorch_python.so" in f.read()
    libpython = os.path.join(sysconfig.get_config_var("LIBDIR") or "",
                             sysconfig.get_config_var("INSTSONAME") or "")
    if links_python and os.path.isfile(libpython):
        env["LD_PRELOAD"] = libpython
    return env
