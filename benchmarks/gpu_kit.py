"""The packages the GPU checks need, carried to a GPU machine that cannot reach the package index.

Such machines come with a CUDA build of PyTorch and its usual company (numpy, safetensors,
tokenizers, ...) but without MuJoCo, MuJoCo Warp, Hydra or this project's ``transformers``. Here,
``download`` resolves what ``benchmarks.gpu_checks`` imports beyond that, at the versions the main
lock pins, as wheels for the GPU machine's Python and platform, and cuts them into bundles of at
most ``--bundle-mib`` each (the warp wheel alone is about 145 MiB), so that the repository and one
bundle fit a transfer limit. There, ``install`` (standard library only) joins the pieces, checks
each wheel's SHA-256 and installs the wheels with pip, without their dependencies, over the
machine's own environment, then this project in editable mode; ``benchmarks/gpu_device.sh`` does
that and runs the checks.

    python -m benchmarks.gpu_kit download          # here: .gpu-kit/bundle-1 ... bundle-N
    python3 -m benchmarks.gpu_kit install .gpu-kit # there
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK = REPO_ROOT / "constraints" / "main.txt"
KIT_DIR = REPO_ROOT / ".gpu-kit"

# Resolved with their dependencies (what the checks import that such a machine lacks or holds at
# another version: transformers' pi0 needs the locked release).
ROOTS = ("transformers", "mujoco-warp", "gymnasium")
# Taken at the lock's pins without resolving: Hydra (antlr4-python3-runtime 4.9.3 exists only as a
# source archive, which the resolver for another platform refuses, so it is built into a wheel here),
# the build backend of this project's editable install (setuptools>=77 reads its SPDX license), and
# the peft the LoRA updates were tested with (resolving it would bring torch's CUDA libraries, 3 GB;
# what else it needs, accelerate and psutil, such a machine holds, or the roots bring).
UNRESOLVED = ("hydra-core", "omegaconf", "antlr4-python3-runtime", "setuptools", "wheel", "peft")
SOURCE_ONLY = ("antlr4-python3-runtime",)
# What a CUDA PyTorch machine holds already, in versions the roots accept (transformers checks
# regex, tokenizers and safetensors against its floors at import, so those are carried).
PROVIDED = ("torch", "numpy", "pyyaml", "hf-xet")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64")
PLATFORMS += ("manylinux2014_x86_64",)
MANIFEST = "manifest.json"
TREE_SUFFIX = ".tree.tar.gz"
"""A bundled file with this ending is a folder tree (package files that travel without a wheel,
``gpu_kit_libero``), unpacked into site-packages by ``install``."""


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(lock: Path = LOCK) -> dict[str, str]:
    """``{normalised name: version}`` of the ``name==version`` lines of a pip-compile lock."""
    pins = {}
    for line in lock.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line):
            pins[normalise(match[1])] = match[2]
    return pins


def wheel_pin(filename: str) -> tuple[str, str]:
    """``(normalised name, version)`` of a wheel's file name."""
    name, version = filename.split("-")[:2]
    return normalise(name), version


def target_options(python_version: str) -> list[str]:
    platforms = [option for platform in PLATFORMS for option in ("--platform", platform)]
    return ["--python-version", python_version, "--implementation", "cp", *platforms, "--only-binary=:all:"]


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def resolve(python_version: str, lock: Path, work: Path, roots: Sequence[str] = ROOTS) -> dict[str, str]:
    """``{name: version}`` of ``roots`` and their dependencies for the target, under ``lock``."""
    constraints = work / "constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in lock_pins(lock).items() if n != "torch"))
    report = work / "report.json"
    pip(
        "install", "--quiet", "--dry-run", "--ignore-installed", "--target", str(work / "unused"),
        "--report", str(report), *target_options(python_version), "-c", str(constraints), *roots,
    )  # fmt: skip
    installs = json.loads(report.read_text())["install"]
    return {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in installs}


def download(
    kit: Path,
    python_version: str,
    bundle_mib: float,
    lock: Path = LOCK,
    roots: Sequence[str] = ROOTS,
    trees: Sequence[Path] = (),
) -> list[Path]:
    """Fetch the wheels of ``roots`` (and ``UNRESOLVED``) into ``kit/wheels`` and cut them, with the
    folder ``trees`` (``*`` + ``TREE_SUFFIX``), into ``kit/bundle-*``."""
    wheels = kit / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        versions = resolve(python_version, lock, Path(work), roots)
    pins = lock_pins(lock)
    versions.update({name: pins[name] for name in UNRESOLVED})
    wanted = {n: v for n, v in versions.items() if n not in PROVIDED}
    binary = [f"{n}=={v}" for n, v in sorted(wanted.items()) if n not in SOURCE_ONLY]
    pip("download", "--quiet", "--no-deps", "-d", str(wheels), *target_options(python_version), *binary)
    for name in SOURCE_ONLY:
        pip("wheel", "--quiet", "--no-deps", "-w", str(wheels), f"{name}=={wanted[name]}")
    chosen = [p for p in sorted(wheels.glob("*.whl")) if wheel_pin(p.name) in wanted.items()]
    return write_bundles([*chosen, *trees], kit, int(bundle_mib * 2**20))


def write_bundles(files: list[Path], kit: Path, bundle_bytes: int) -> list[Path]:
    """Cut ``files`` into pieces filling ``kit/bundle-1``, ``bundle-2``, ... up to ``bundle_bytes``
    each; every bundle holds the manifest (each file's SHA-256 and its pieces, in order)."""
    for old in kit.glob("bundle-*"):
        for piece in old.iterdir():
            piece.unlink()
        old.rmdir()
    bundles: list[list[tuple[str, bytes]]] = [[]]
    room, manifest = bundle_bytes, {}
    for path in files:
        data = path.read_bytes()
        pieces, offset = [], 0
        while offset < len(data):
            if room == 0:
                bundles.append([])
                room = bundle_bytes
            chunk = data[offset : offset + room]
            piece = f"bundle-{len(bundles)}/{path.name}.part{len(pieces)}"
            bundles[-1].append((piece, chunk))
            pieces.append(piece)
            offset, room = offset + len(chunk), room - len(chunk)
        manifest[path.name] = {"sha256": hashlib.sha256(data).hexdigest(), "pieces": pieces}
    dirs = []
    for index, contents in enumerate(bundles, start=1):
        (bundle := kit / f"bundle-{index}").mkdir(parents=True)
        for piece, chunk in contents:
            (kit / piece).write_bytes(chunk)
        (bundle / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        dirs.append(bundle)
    return dirs


def join_wheels(kit: Path, into: Path) -> list[Path]:
    """The wheels of the bundles under ``kit`` rebuilt in ``into``, each checked against its SHA-256."""
    manifests = sorted(kit.glob(f"bundle-*/{MANIFEST}"))
    if not manifests:
        raise SystemExit(
            f"no bundle under {kit}: run `make gpu-kit` where the index is reachable, bring .gpu-kit"
        )
    manifest = json.loads(manifests[0].read_text())
    pieces = [piece for entry in manifest.values() for piece in entry["pieces"]]
    missing = sorted({piece.split("/")[0] for piece in pieces if not (kit / piece).is_file()})
    if missing:
        raise SystemExit(f"the kit under {kit} lacks {', '.join(missing)}: bring every bundle")
    into.mkdir(parents=True, exist_ok=True)
    wheels = []
    for name, entry in manifest.items():
        data = b"".join((kit / piece).read_bytes() for piece in entry["pieces"])
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise SystemExit(f"{name}: its pieces do not give the wheel that was cut (SHA-256 differs)")
        (wheel := into / name).write_bytes(data)
        wheels.append(wheel)
    return wheels


def install(kit: Path, target: Path | None = None, project: Path | None = REPO_ROOT) -> None:
    """Join the kit's files and install its wheels without their dependencies, unpack its folder
    trees, then install ``project`` in editable mode (its ``package-dir`` maps ``sims/``,
    ``robots/``, ... into ``vla_rl``), into this interpreter's environment or, given ``target``,
    into that folder."""
    offline = [
        "install",
        "--quiet",
        "--no-index",
        "--no-deps",
        *([] if target is None else ["--target", str(target)]),
    ]
    with tempfile.TemporaryDirectory() as work:
        joined = join_wheels(kit, Path(work))
        wheels = [path for path in joined if path.suffix == ".whl"]
        if wheels:
            pip(*offline, "--no-compile", "--upgrade", *map(str, wheels))
        site = target or Path(sysconfig.get_paths()["purelib"])
        for tree in (path for path in joined if path.name.endswith(TREE_SUFFIX)):
            with tarfile.open(tree) as archive:
                archive.extractall(site, filter="data")
    if project is not None:
        pip(*offline, "--no-build-isolation", "-e", str(project))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("download", help="here: resolve, fetch and bundle the wheels")
    get.add_argument("--kit", type=Path, default=KIT_DIR)
    get.add_argument("--python-version", default="3.12", help="the GPU machine's Python")
    get.add_argument("--bundle-mib", type=float, default=44.0, help="largest bundle (MiB)")
    put = commands.add_parser("install", help="there: join the bundles and install the wheels")
    put.add_argument("kit", type=Path)
    put.add_argument("--target", type=Path, help="a folder instead of this interpreter's environment")
    args = parser.parse_args()
    if args.command == "install":
        install(args.kit, args.target)
        return
    bundles = download(args.kit, args.python_version, args.bundle_mib)
    for bundle in bundles:
        size = sum(p.stat().st_size for p in bundle.iterdir()) / 2**20
        print(f"{bundle}: {size:.1f} MiB")


if __name__ == "__main__":
    main()
