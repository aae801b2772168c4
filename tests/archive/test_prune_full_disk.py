"""`capture prune` on a full disk exits 13 with a sentence (it gave a traceback and exit 1), and
what it did not prune is still whole.

The disk is a 2 MiB tmpfs mounted in a private mount namespace (`unshare --mount --map-root-user`), so the test
needs no privilege and leaves no mount behind; where the kernel refuses such namespaces it is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import MAJORDOMUS

SCRIPT = r"""
set -e
mount -t tmpfs -o size=2m tmpfs "$DISK"
cd "$DISK"
git init -q -b main repo && cd repo
git commit -q --allow-empty -m first
"$MAJORDOMUS" init > /dev/null
printf '%s' '{"session_id": "full", "source": "startup"}' \
  | "$MAJORDOMUS" capture session --provider claude-code --event start 2> /dev/null
for i in 1 2 3 4 5; do
  printf '{"session_id": "full", "prompt": "prompt number %s, long enough to keep"}' "$i" \
    | "$MAJORDOMUS" capture prompt --provider claude-code 2> /dev/null
done
sed -i 's/retention_max_bytes: .*/retention_max_bytes: 10/' .ai/repo/policy.yaml
dd if=/dev/zero of="$DISK/fill" bs=4k 2> /dev/null || true
set +e
"$MAJORDOMUS" capture prune > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/rc"
cp .ai/local/prompts/*.json "$OUT/"
"""


@pytest.mark.slow
def test_prune_on_a_full_disk_exits_13_with_a_sentence_and_keeps_every_record(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--mount", "--map-root-user", "true"],
                                                         capture_output=True).returncode != 0:
        pytest.skip("no unprivileged mount namespace here")
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    done = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", SCRIPT], capture_output=True,
                          timeout=120, env={**os.environ, "DISK": str(disk), "OUT": str(out),
                                            "MAJORDOMUS": str(MAJORDOMUS)})
    assert done.returncode == 0, done.stderr
    said = (out / "stderr").read_text() + (out / "stdout").read_text()
    assert (out / "rc").read_text().strip() == "13", said
    assert "Traceback" not in said and "No space left on device" in said and "run majordomus capture prune" in said
    records = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(records) == 5  # every record parses: none was torn by the full disk

