"""A first save that cannot fit (12 MiB into an 8 MiB backing) fails with ENOSPC and leaves
nothing: within moments of the close (the kernel's release comes after close returns), its
name is gone from the mount (stat and listing) and its space is back, so a 6 MiB save fits."""
import errno, os, time
try:
    with open("big", "wb") as file:
        for _ in range(12):
            file.write(b"x" * (1 << 20))
    print("big saved")
except OSError as error:
    print("big failed", errno.errorcode[error.errno])

def gone():
    try:
        os.stat("big")
        return False
    except FileNotFoundError:
        return "big" not in os.listdir(".")

def free():
    status = os.statvfs(".")
    return status.f_bavail * status.f_frsize

deadline = time.time() + 3
while not (gone() and free() >= 7 << 20) and time.time() < deadline:
    time.sleep(0.02)
print("gone", gone(), "space back", free() >= 7 << 20)
with open("next", "wb") as file:
    file.write(b"y" * (6 << 20))
print("next", os.stat("next").st_size)
