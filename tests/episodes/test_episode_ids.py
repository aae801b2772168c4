"""An episode never takes an id another episode holds. Found by the soak (bench/soak.py): two episodes opened in
one second drew the same id (`s-<second>-<four hex>`, 1 in 65,536 a pair), and the second's end found the first's
record, said "this close adds none" and wrote nothing: its sitting had no record, and the other's record stood for
both. An id is now taken only where no working context holds it.

Through the real hooks: half of the ids of a coming second are taken beforehand (working contexts under their
names); starts in that second must draw only free ones, and each sitting ends with its own record. Before the fix
each start took a taken id with even odds (the context was overwritten), so ten starts all passing was 1 in 1,024.
"""

from __future__ import annotations

import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

from support import hook, records


def test_an_episode_never_takes_an_id_another_episode_holds(initialised_repo: Path) -> None:
    contexts = initialised_repo / ".ai/local/session-contexts"
    margin = 6  # seconds to lay out 32,768 names; a loaded machine that needs more gets twice what it took
    for _ in range(4):
        contexts.mkdir(parents=True, exist_ok=True)
        began = time.time()
        second = int(began) + margin
        stamp = datetime.fromtimestamp(second, timezone.utc)
        taken = {f"s-{stamp:%Y%m%d%H%M%S}-{n:04x}" for n in range(0, 65536, 2)}  # every even suffix
        for sid in taken:
            (contexts / f"{stamp:%Y%m%dT%H%M%SZ}--{sid}.md").write_text("---\nsession_id: taken\n---\n")
        if time.time() < second:
            break
        margin = 2 * int(time.time() - began) + 2
        shutil.rmtree(contexts)
    else:
        raise AssertionError("the machine was too slow, four times, to lay out the taken ids before their second")
    time.sleep(second - time.time() + 0.05)
    opened: dict[str, str] = {}
    for n in range(10):
        done = hook(initialised_repo, "start", {"session_id": f"ps-{n}"})
        assert done.returncode == 0, done.stderr
        said = done.stdout.decode() + done.stderr.decode()
        sid = next(word for word in said.split() if word.startswith("s-"))
        opened[f"ps-{n}"] = sid
    in_second = [sid for sid in opened.values() if sid.startswith(f"s-{stamp:%Y%m%d%H%M%S}-")]
    assert len(in_second) >= 5, opened  # most of them opened in the laid-out second
    assert not taken & set(opened.values()), opened
    assert len(set(opened.values())) == 10
    for ps in opened:
        assert hook(initialised_repo, "end", {"session_id": ps, "reason": "logout"}).returncode == 0
    written = sorted(r["session_id"] for r in records(initialised_repo).values())
    assert written == sorted(opened.values())  # a record each, none standing for two sittings
