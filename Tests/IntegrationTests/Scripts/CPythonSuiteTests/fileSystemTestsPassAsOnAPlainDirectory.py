"""CPython's own file-system tests, run on a coordfs mount and on a plain directory.

    fileSystemTestsPassAsOnAPlainDirectory.py [options] MOUNT_DIR PLAIN_DIR [MODULE...]

Both directories exist already (the caller makes them). The script runs Debian's copy of
CPython's regression tests (libpython3.11-testsuite, `python3.11 -m test`) twice, once with
its work directory and TMPDIR under MOUNT_DIR and once under PLAIN_DIR, each writing
per-case results as JUnit XML. It then prints both runs' counts and every test case that
fails (or errs, or has no result at all) on the mount while it passes on the plain
directory. Cases named in the exception file are set aside; each of its entries must quote
the README's "Known differences from the bare disk" list. The exit status is 1 when a
difference remains, 2 when the comparison itself could not be made, 0 otherwise.

Only the standard library is used.
"""
import argparse, collections, os, signal, subprocess, sys, time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.normpath(os.path.join(HERE, '..', '..', '..', '..'))

# The modules of CPython's suite that are about files: the ones the issue names, the dbm
# backends test_dbm dispatches to, and others cheap enough to add (a few seconds each):
# paths, comparisons and line reading, bytecode written beside sources, imports from zips,
# memory mappings, files past 2 GiB (sparse ones, and a copy of one), non-ASCII names.
# Left out: test_selectors, whose test_register_file expects epoll to refuse a regular file
# (every FUSE file can be polled, so that is the kernel's FUSE module, not coordfs); and
# test_sqlite3, which Debian's libpython3.11-testsuite does not ship.
MODULES = [
    'test_os', 'test_shutil', 'test_tempfile', 'test_pathlib', 'test_subprocess', 'test_fcntl',
    'test_io', 'test_fileio', 'test_glob', 'test_posix', 'test_stat', 'test_zipfile',
    'test_tarfile', 'test_mailbox', 'test_dbm', 'test_dbm_dumb', 'test_dbm_gnu', 'test_dbm_ndbm',
    'test_shelve', 'test_logging', 'test_compileall',
    'test_posixpath', 'test_genericpath', 'test_filecmp', 'test_fileinput', 'test_linecache',
    'test_py_compile', 'test_importlib', 'test_zipimport', 'test_zipapp', 'test_mmap',
    'test_largefile', 'test_file', 'test_file_eintr', 'test_unicode_file',
    'test_unicode_file_functions',
]

PASS, FAIL, ERROR, SKIP, MISSING = 'pass', 'fail', 'error', 'skip', 'no result'


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('mount', help='a directory inside the coordfs mount')
    parser.add_argument('plain', help='a plain directory on the backing\'s file system')
    parser.add_argument('--python', default='/usr/bin/python3.11',
                        help='the interpreter whose test suite runs (Debian\'s, not one found on PATH)')
    parser.add_argument('--exceptions', default=os.path.join(HERE, 'known-differences.txt'),
                        help='the exception file')
    parser.add_argument('--readme', default=os.path.join(REPOSITORY, 'README.md'),
                        help='the README whose known differences the exceptions must quote')
    parser.add_argument('--results', help='where the XML results and logs go (default: PLAIN/results)')
    parser.add_argument('--jobs', type=int, default=2,
                        help='regrtest worker processes per run (each module in a fresh process)')
    parser.add_argument('--sequential', action='store_true',
                        help='run the plain directory first and the mount after it, not both at once')
    parser.add_argument('--timeout', type=int, default=600,
                        help='seconds one test module may take before regrtest kills its worker')
    parser.add_argument('--deadline', type=int, default=1800,
                        help='seconds a whole run may take before it is killed')
    parser.add_argument('--match', action='append', default=[],
                        help='only the cases matching this regrtest pattern (repeatable)')
    parser.add_argument('modules', nargs='*',
                        help='the test modules (default: the file-system ones listed in this script)')
    arguments = parser.parse_args()
    arguments.modules = arguments.modules or MODULES
    return arguments


def give_up(message):
    """Ends the script with status 2: the comparison could not be made."""
    print(message, file=sys.stderr)
    sys.exit(2)


def clean_environment(temporary):
    """The environment of a run: this process's, without the PYTHON* settings the test harness
    gives its scripts (bytecode off, its own folder on the path), with TMPDIR inside the run's
    directory so that tempfile's files land on the side under test too, and a UTF-8 locale
    (the harness's C locale puts Python in UTF-8 mode, which skips a few cases)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith('PYTHON')}
    environment['TMPDIR'] = temporary
    environment['LC_ALL'] = 'C.UTF-8'
    return environment


class Run:
    """One `python3.11 -m test` over the modules, its work directory under `root`."""

    def __init__(self, side, root, results, arguments):
        self.side = side
        self.work = os.path.join(root, 'cpython-suite')
        self.temporary = os.path.join(self.work, 'tmp')
        self.xml = os.path.join(results, side + '.xml')
        self.log = os.path.join(results, side + '.log')
        self.deadline = arguments.deadline
        os.makedirs(self.temporary, exist_ok=True)
        self.command = [arguments.python, '-m', 'test',
                        '--tempdir', self.work,
                        '--junit-xml', self.xml,
                        '--timeout', str(arguments.timeout),
                        '-j', str(arguments.jobs),
                        # No optional resources: no network here, and the cpu- and
                        # largefile-hungry cases test the machine more than the file system.
                        '-u', 'none']
        for pattern in arguments.match:
            self.command += ['--match', pattern]
        self.command += arguments.modules
        self.process = None
        self.seconds = None
        self.status = None

    def start(self):
        self.started = time.monotonic()
        self.log_file = open(self.log, 'wb')
        # A session of its own, so a run that overstays its deadline goes with all its children.
        self.process = subprocess.Popen(self.command, cwd=self.work, env=clean_environment(self.temporary),
                                        stdin=subprocess.DEVNULL, stdout=self.log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self):
        remaining = self.deadline - (time.monotonic() - self.started)
        try:
            self.status = self.process.wait(timeout=max(remaining, 1))
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.status = self.process.wait()
            print(f'{self.side}: killed after its deadline of {self.deadline} s', flush=True)
        # Whatever a killed run left behind (test processes of its session) goes too.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.seconds = time.monotonic() - self.started
        self.log_file.close()


def outcomes(path):
    """Each test case's outcome and, for failures and errors, its traceback, from regrtest's
    JUnit XML. An expected failure counts as a pass, an unexpected success as a failure."""
    cases = {}
    for case in ET.parse(path).getroot().iter('testcase'):
        children = {child.tag: child for child in case}
        if 'skipped' in children:
            outcome, detail = SKIP, children['skipped'].text or ''
        elif 'failure' in children:
            outcome, detail = FAIL, children['failure'].text or ''
        elif 'error' in children:
            outcome, detail = ERROR, children['error'].text or ''
        elif 'outcome' in children:
            outcome, detail = FAIL, 'unexpected success'
        else:
            outcome, detail = PASS, ''
        cases[case.get('name')] = (outcome, detail)
    return cases


def known_differences(readme_path):
    """The README's "Known differences from the bare disk" list, as one text with its
    whitespace normalized and no backquotes."""
    with open(readme_path, encoding='utf-8') as readme:
        text = readme.read()
    start = text.find('Known differences from the bare disk')
    if start < 0:
        give_up(f'{readme_path} has no "Known differences from the bare disk" list')
    end = text.find('\n## ', start)
    return ' '.join(text[start:end if end > 0 else len(text)].replace('`', '').split())


def exceptions(path, readme_path):
    """The exception file: `CASE_ID  QUOTE` per line, `#` comments. QUOTE is words of the
    README's known-difference bullet that explains the case, quoted verbatim."""
    allowed = known_differences(readme_path)
    entries, problems = {}, []
    with open(path, encoding='utf-8') as lines:
        for number, line in enumerate(lines, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            case, _, quote = line.partition(' ')
            quote = ' '.join(quote.strip().strip('"').replace('`', '').split())
            if len(quote) < 12:
                problems.append(f'{path}:{number}: {case} names no README known difference')
            elif quote not in allowed:
                problems.append(f'{path}:{number}: {case}: "{quote}" is not in the README\'s known differences')
            else:
                entries[case] = quote
    if problems:
        give_up('\n'.join(problems))
    return entries


def counts(cases):
    tally = collections.Counter(outcome for outcome, _ in cases.values())
    return ', '.join(f'{tally[kind]} {label}' for kind, label in
                     [(PASS, 'passed'), (FAIL, 'failed'), (ERROR, 'errors'), (SKIP, 'skipped')])


def traceback_tail(text, count=10):
    """The end of a traceback without unittest's own frames, indented for the report."""
    kept, in_unittest = [], False
    for line in text.rstrip().split('\n'):
        if line.startswith('  File '):
            in_unittest = '/unittest/' in line
        elif not line.startswith('    '):
            in_unittest = False
        if not in_unittest and not line.startswith('Traceback '):
            kept.append(line)
    return '\n'.join('      ' + line for line in kept[-count:])


def main():
    # The test runner's threads block signals, and a child inherits its parent's mask: the
    # suite's signal tests (SIGALRM interrupting I/O, subprocess's signals) need them unblocked.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    arguments = parse_arguments()
    allowed = exceptions(arguments.exceptions, arguments.readme)
    results = arguments.results or os.path.join(arguments.plain, 'results')
    os.makedirs(results, exist_ok=True)

    runs = [Run('plain', arguments.plain, results, arguments),
            Run('mount', arguments.mount, results, arguments)]
    print('each run:', ' '.join(runs[1].command), flush=True)
    started = time.monotonic()
    if arguments.sequential:
        for run in runs:
            run.start()
            run.wait()
    else:
        for run in runs:
            run.start()
        for run in runs:
            run.wait()

    print(f'both runs took {time.monotonic() - started:.0f} s'
          f' ({"one after the other" if arguments.sequential else "at the same time"})', flush=True)
    found = {}
    for run in runs:
        if not os.path.exists(run.xml):
            with open(run.log, errors='replace') as log:
                tail = log.read()[-3000:]
            print(f'{run.side}: no results (regrtest exited with {run.status}); its log ends:\n{tail}')
            return 2
        found[run.side] = outcomes(run.xml)
        print(f'{run.side:5}: {counts(found[run.side])} in {run.seconds:.0f} s '
              f'(regrtest exit {run.status}; log {run.log})', flush=True)

    plain, mounted = found['plain'], found['mount']
    differences = []   # (case, outcome on the mount, detail)
    for case, (outcome, _) in sorted(plain.items()):
        if outcome != PASS:
            continue
        mount_outcome, detail = mounted.get(case, (MISSING, 'no result on the mount: its module '
                                                  'crashed, timed out or failed before this case'))
        if mount_outcome in (FAIL, ERROR, MISSING):
            differences.append((case, mount_outcome, detail))
    excused = [d for d in differences if d[0] in allowed]
    remaining = [d for d in differences if d[0] not in allowed]
    skipped_only_here = sorted(case for case, (outcome, _) in mounted.items()
                               if outcome == SKIP and plain.get(case, (None,))[0] == PASS)

    for case in skipped_only_here:
        print(f'skipped on the mount only: {case}: {mounted[case][1].strip()}')
    for case, outcome, _ in excused:
        print(f'known difference ({outcome}): {case}: "{allowed[case]}"')
    for case in sorted(set(allowed) - {d[0] for d in differences}):
        print(f'exception no longer needed: {case}')
    if remaining:
        print(f'{len(remaining)} test cases fail on the mount and pass on the plain directory:')
        for case, outcome, detail in remaining:
            print(f'  {case} ({outcome})')
            print(traceback_tail(detail))
        print('fails on the mount, passes on the plain directory:')
        for case, outcome, _ in remaining:
            print(f'  {case}')
        return 1
    print('no test case fails on the mount that passes on the plain directory')
    return 0


if __name__ == '__main__':
    sys.exit(main())
