"""What Scripts/bench and its modules share: the error that ends a run with one line, logging,
running commands, rates."""
import os
import shlex
import signal
import subprocess
import sys
import time

COMMAND_TIMEOUT = 3600


class BenchError(Exception):
    """A failure that ends the benchmark with a one-line message."""


def log(message):
    print(message, file=sys.stderr, flush=True)


def run_command(argv, what, cwd=None, timeout=COMMAND_TIMEOUT, ok_codes=(0,)):
    """Runs argv quietly; raises BenchError with its output if it fails."""
    try:
        result = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, timeout=timeout)
    except FileNotFoundError:
        raise BenchError(f"{what}: {argv[0]} not found")
    except subprocess.TimeoutExpired:
        raise BenchError(f"{what}: timed out after {timeout} s: {shlex.join(argv)}")
    if result.returncode not in ok_codes:
        output = (result.stderr.strip() or result.stdout.strip())[-3000:]
        raise BenchError(f"{what} failed (exit {result.returncode}): {shlex.join(argv)}\n{output}")
    return result


def timed_shell(command, cwd, ok_codes=(0,)):
    """Runs a shell command in cwd; returns (seconds, stdout). The command gets its own process
    group, and the whole group is killed if anything interrupts us, so no tar or grep is left
    working inside a mount we are about to unmount."""
    start = time.perf_counter()
    process = subprocess.Popen(command, shell=True, cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT)
    except BaseException:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        raise
    seconds = time.perf_counter() - start
    if process.returncode not in ok_codes:
        raise BenchError(f"'{command}' exited {process.returncode}: {stderr.strip()[-500:]}")
    return seconds, stdout.strip()


def rate(count, seconds):
    return count / seconds if seconds > 0 else float("inf")
