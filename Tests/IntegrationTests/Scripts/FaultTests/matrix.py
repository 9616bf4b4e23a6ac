"""Faults of the backing, case by case: `matrix.py MOUNT BACKING CONTROL ERRNO`.

Each case sets a rule in the fault shim's CONTROL file (see Tests/FaultShim/faultshim.c), does one
thing through the mount, clears the rule, and prints one line: what the program got, what
the mount shows, and what the backing holds beside the files the case made. Then a normal
save of the same file must work (nothing stuck)."""
import errno, os, sys, time

mount, backing, control, error_name = sys.argv[1:5]

def rule(text):
    with open(control, "w") as file:
        file.write(text + "\n")

def clear():
    with open(control, "w") as file:
        file.write("")

def read(path):
    try:
        with open(os.path.join(mount, path), "rb") as file:
            return file.read().decode()
    except OSError as error:
        return errno.errorcode[error.errno]

def leftovers():
    """Names in the backing that are not the cases' own files: temps, conflict copies."""
    time.sleep(0.2)  # a close's release reaches the daemon after close returns
    return sorted(name for name in os.listdir(backing) if name.startswith(".coordfs") or ".conflict-" in name)

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))

def save(path, text, mode="w"):
    def action():
        with open(os.path.join(mount, path), mode) as file:
            file.write(text)
    return action

def report(case, outcome, path, extra=""):
    print(f"{case}: {outcome}; {path} {read(path)!r}; left {leftovers()}{extra}", flush=True)

def case_save(name, operation):
    with open(os.path.join(mount, name), "w") as file:
        file.write("committed\n")
    rule(f"{operation} {error_name} 0 1000000")
    outcome = attempt(save(name, "new version\n"))
    clear()
    report(f"save, {operation} fails", outcome, name)
    save(name, "after\n")()
    print(f"  then {read(name)!r}", flush=True)

def case_first_save():
    rule(f"write {error_name} 0 1000000")
    outcome = attempt(save("new.txt", "never\n"))
    clear()
    time.sleep(0.2)
    present = "new.txt" in os.listdir(mount) or os.path.exists(os.path.join(backing, "new.txt"))
    print(f"first save, write fails: {outcome}; name left {present}; left {leftovers()}", flush=True)

def case_append():
    with open(os.path.join(mount, "log.txt"), "w") as file:
        file.write("line 1\n")
    rule(f"write {error_name} 0 1000000")
    outcome = attempt(save("log.txt", "line 2\n", "a"))
    clear()
    report("append, write fails", outcome, "log.txt")
    save("log.txt", "line 3\n", "a")()
    print(f"  then {read('log.txt')!r}", flush=True)

def case_in_place():
    with open(os.path.join(mount, "data.db"), "w") as file:
        file.write("database\n")
    rule(f"write {error_name} 0 1000000")
    outcome = attempt(save("data.db", "rewritten\n", "r+"))
    clear()
    report("in place, write fails", outcome, "data.db")

def case_rename():
    with open(os.path.join(mount, "from.txt"), "w") as file:
        file.write("moving\n")
    rule(f"rename {error_name} 0 1000000")
    outcome = attempt(lambda: os.rename(os.path.join(mount, "from.txt"), os.path.join(mount, "to.txt")))
    clear()
    report("rename fails", outcome, "from.txt", f"; to.txt {read('to.txt')!r}")

def case_conflict():
    with open(os.path.join(mount, "shared.txt"), "w") as file:
        file.write("base\n")
    outcome = "?"
    file = open(os.path.join(mount, "shared.txt"), "w")
    file.write("through the mount\n")
    file.flush()
    with open(os.path.join(backing, "shared.txt"), "w") as behind:
        behind.write("behind the mount\n")
    time.sleep(0.3)
    rule(f"link {error_name} 0 1000000")
    outcome = attempt(file.close)
    clear()
    report("conflict copy fails", outcome, "shared.txt")

for operation in ["write", "fsync", "link", "rename"]:
    case_save(f"save-{operation}.txt", operation)
case_first_save()
case_append()
case_in_place()
case_rename()
case_conflict()
