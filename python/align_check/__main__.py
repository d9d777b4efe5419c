"""`align-check` as installed from the wheel: finds what the Rust binary needs in the installed
Python packages, says in one line what does not fit, then runs the binary in its place.

The binary (`bin/align-check`, beside this file) links libtorch 2.13.0 (tch 0.26 binds exactly
that version) and loads ONNX Runtime 1.31 when it starts a check; the wheel carries neither.
So this launcher:
- finds the `torch` package without importing it (an import takes seconds), checks that it is
  the version the wheel requires and puts its `lib/` first on LD_LIBRARY_PATH;
- finds `onnxruntime/capi/libonnxruntime.so.*` and passes it as ORT_DYLIB_PATH, unless the user
  chose a library already (ORT_DYLIB_PATH, --ort-lib, or `ort_lib` in the configuration file,
  which the binary would otherwise let ORT_DYLIB_PATH override);
- runs `summary`, `--help` and `--version` with `align-check-summary`, a build of the same
  command line with no libtorch in it, so that a summary job needs no torch at all.
A mismatch (no torch, another torch, no onnxruntime) is one line on stderr and exit 2, the
binary's code for "could not do its job": what was found, what is needed, the pip command.
The versions come from the wheel's own requirements (pyproject.toml), written down once.
"""

import importlib.metadata as metadata
import importlib.util
import os
import re
import shlex
import shutil
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
FULL = os.path.join(HERE, "bin", "align-check")
LIGHT = "align-check-summary"
LIGHT_FLAGS = ("-h", "--help", "-V", "--version")
REINSTALL = "pip install --force-reinstall the align-check wheel (dist/align_check-*.whl)"


class Mismatch(Exception):
    """What was found and what is needed, in one line; the launcher's only error."""


def pins():
    """{'torch': '2.13.0', 'onnxruntime': '1.31.1'}: the wheel's `==` requirements."""
    try:
        requires = metadata.requires("align-check") or []
    except metadata.PackageNotFoundError:
        requires = []
    found = {}
    for req in requires:
        m = re.fullmatch(r"\s*(torch|onnxruntime)\s*==\s*([\w.]+)\s*", req)
        if m:
            found[m.group(1)] = m.group(2)
    if set(found) != {"torch", "onnxruntime"}:
        raise Mismatch("found no `torch==` and `onnxruntime==` requirements in align-check's "
                       f"package metadata, needs an installed align-check wheel; fix: {REINSTALL}")
    return found


def pip(*what):
    return " ".join([shlex.quote(sys.executable), "-m", "pip", "install", *what])


def package_dir(name):
    """Where `name` is installed, found as `import` would find it, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def torch_version(torch_dir):
    """The version of the torch in `torch_dir`, from its version.py (as build.rs reads it)."""
    try:
        with open(os.path.join(torch_dir, "version.py"), encoding="utf-8") as f:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", f.read(), re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "unknown"


def find_libtorch(need):
    """torch's lib/ folder, when the installed torch is `need` (a local label like +cpu is
    the same libtorch API); else Mismatch."""
    torch_dir = package_dir("torch")
    fix = pip(f"torch=={need}")
    if torch_dir is None:
        raise Mismatch(f"found no torch for {sys.executable}, needs torch {need} (its libtorch "
                       f"runs the TorchScript model); fix: {fix}")
    found = torch_version(torch_dir)
    lib = os.path.join(torch_dir, "lib")
    if found.split("+")[0] != need:
        raise Mismatch(f"found torch {found} in {torch_dir}, needs torch {need} (the libtorch "
                       f"this align-check is built against, exactly); fix: {fix}")
    if not os.path.isfile(os.path.join(lib, "libtorch_cpu.so")):
        raise Mismatch(f"found torch {found} in {torch_dir} without lib/libtorch_cpu.so, needs "
                       f"the torch {need} wheel from PyPI; fix: {pip('--force-reinstall', f'torch=={need}')}")
    return lib


def find_onnxruntime(need):
    """libonnxruntime.so.* inside the installed onnxruntime package, when its major.minor is
    `need`'s (the C API level the binary asks for); else Mismatch."""
    ort_dir = package_dir("onnxruntime")
    fix = pip(f"onnxruntime=={need}")
    why = "its libonnxruntime.so runs the ONNX model"
    if ort_dir is None:
        raise Mismatch(f"found no onnxruntime for {sys.executable}, needs onnxruntime {need} "
                       f"({why}; or pass --ort-lib PATH); fix: {fix}")
    capi = os.path.join(ort_dir, "capi")
    libs = sorted(f for f in os.listdir(capi) if f.startswith("libonnxruntime.so.")) \
        if os.path.isdir(capi) else []
    if not libs:
        raise Mismatch(f"found onnxruntime in {ort_dir} without capi/libonnxruntime.so.*, "
                       f"needs onnxruntime {need} ({why}); fix: {fix}")
    found = libs[-1][len("libonnxruntime.so."):]
    if found.split(".")[:2] != need.split(".")[:2]:
        raise Mismatch(f"found onnxruntime {found} in {ort_dir}, needs onnxruntime {need} "
                       f"(the ONNX Runtime API this align-check is built against); fix: {fix}")
    return os.path.join(ort_dir, "capi", libs[-1])


def option_value(args, name):
    """The value of `--name VALUE` or `--name=VALUE` among the arguments, if given."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def config_sets_ort_lib(args):
    """Whether the configuration file the binary will read names `ort_lib` itself."""
    path = option_value(args, "--config") or "align-check.toml"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    try:
        import tomllib
        return bool(tomllib.loads(text).get("runtime", {}).get("ort_lib"))
    except Exception:  # Python < 3.11, or a file the binary will refuse with its own message
        return re.search(r"^\s*ort_lib\s*=", text, re.M) is not None


def light_binary():
    """`align-check-summary`, which pip installs beside the `align-check` command."""
    dirs = [os.path.dirname(os.path.abspath(sys.argv[0])), sysconfig.get_path("scripts")]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for d in dirs:
        path = os.path.join(d, LIGHT)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(LIGHT)


def needs_no_runtime(args):
    """`summary`, `--help` and `--version`: what align-check-summary answers alike."""
    if args and args[0] == "summary":
        return True
    before = args[:args.index("--")] if "--" in args else args
    return any(a in LIGHT_FLAGS for a in before) or args[:1] == ["help"]


def environment(args, need):
    """The binary's environment: libtorch on LD_LIBRARY_PATH, ONNX Runtime unless chosen."""
    env = dict(os.environ)
    lib = find_libtorch(need["torch"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [lib] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    chosen = (env.get("ORT_DYLIB_PATH") or option_value(args, "--ort-lib")
              or config_sets_ort_lib(args))
    # `inspect` of a TorchScript file needs no ONNX Runtime: the binary says when it does.
    if not chosen and not (args[:1] == ["inspect"] and package_dir("onnxruntime") is None):
        env["ORT_DYLIB_PATH"] = find_onnxruntime(need["onnxruntime"])
    return env


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        light = needs_no_runtime(args) and light_binary()
        if light:
            os.execv(light, ["align-check"] + args)
        env = environment(args, pins())
        os.execve(FULL, ["align-check"] + args, env)
    except Mismatch as err:
        print(f"align-check: error: {err}", file=sys.stderr)
    except OSError as err:
        print(f"align-check: error: cannot run the align-check binary of this wheel "
              f"({err}); fix: {REINSTALL}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
