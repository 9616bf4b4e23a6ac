"""A program of the Python client's (clients/python) that subscribes, presents and claims
through a coordfs mount: Packaging/check runs it on a clean Debian root. Argument: the mount."""
import sys
import threading

import coordfs

asked = threading.Event()


class Notes(coordfs.Presenter[str]):
    def save(self, item: coordfs.PresentedItem[str]) -> None:  # before another process reads
        print("saved", item.path, "before a reader", flush=True)   # (write unsaved changes here)
        asked.set()


mount_path = sys.argv[1]
with coordfs.connect(mount_path) as mount:
    events = mount.events(mount_path, recursive=True)
    with mount.present(Notes(), mount_path + "/notes.txt"):
        print("presenting", flush=True)
        asked.wait(30)                                             # until someone reads notes.txt
    with mount.claim(mount_path + "/counter", "write"):            # nobody else sees or changes it
        with open(mount_path + "/counter", "w") as counter:
            counter.write("1\n")
    for event in events:
        if isinstance(event, coordfs.Event) and event.path == "/counter":
            print("heard", event.kind, event.path, flush=True)
            break
