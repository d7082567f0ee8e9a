"""A holder of one task's record in a store, driven line by line (test_fenced_holders.py).

    python holder.py URL TASK      takes the lease, fences the head, prints `epoch N`; then reads
    append TEXT                    a journal record {"text": TEXT}: prints `ok`, or `refused: …`
                                   and exits 3 when the store refuses it
    release                        ends the lease and exits 0
"""

from __future__ import annotations

import sys

from normalize.errors import StaleEpochError
from normalize.store.fenced import FencedJournal, ObjectLease
from normalize.store.objects import open_objects


def main(url: str, task_id: str) -> int:
    objects = open_objects(url)
    lease = ObjectLease(objects, task_id)
    epoch = lease.acquire()
    journal = FencedJournal(objects, task_id, epoch)
    journal.fence()
    lease.keep()
    print(f"epoch {epoch}", flush=True)
    for line in sys.stdin:
        word, _, text = line.strip().partition(" ")
        if word == "append":
            try:
                journal.append([{"text": text}])
            except StaleEpochError as exc:
                print(f"refused: {exc} (lease lost: {lease.lost.is_set()})", flush=True)
                return 3
            print("ok", flush=True)
        elif word == "release":
            lease.release()
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
