"""A Node.js app of a peer (its folder here, with package.json and a
committed package-lock.json), copied to where it runs and installed there
with `npm ci`, pinned by the lock file. Shared by the Node peers; not a
peer itself."""

import hashlib
import os
import shutil
import subprocess

STAMP = ".installed-lock-sha256"


def copy_app(src: str, dst: str) -> None:
    """Every file of the app folder `src` into `dst` (replaced); nothing else there is touched."""
    shutil.copytree(src, dst, dirs_exist_ok=True)


def install(src: str, root: str) -> None:
    """The app in `root`, `npm ci`-ed; the install is skipped when `root` already holds
    node_modules from this very lock file."""
    copy_app(src, root)
    with open(os.path.join(src, "package-lock.json"), "rb") as f:
        lock = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(root, STAMP)
    if os.path.isdir(os.path.join(root, "node_modules")) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == lock:
                return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=root, check=True)
    with open(stamp, "w") as f:
        f.write(lock + "\n")
