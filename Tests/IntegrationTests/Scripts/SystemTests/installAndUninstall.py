# Scripts/install into a temporary prefix (with the binary under test, not a new release
# build) puts the program (the launcher and coordfs-full beside it), the mount helper, the units, a manual page per subcommand and the
# bash, zsh and fish completions in place, each usable; --uninstall then leaves the prefix
# exactly as it found it (empty), and a second --uninstall says there is nothing to remove.
import os, subprocess, tempfile, shutil
from system import BINARY

root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', '..'))
prefix = tempfile.mkdtemp(prefix='coordfs-install-')
try:
    def install(*arguments):
        return subprocess.run([os.path.join(root, 'Scripts', 'install'), '--prefix', prefix] + list(arguments),
                              capture_output=True, text=True)

    # Scripts/test builds the manual writer beside the binary: a build from inside `swift test`
    # would wait for the build directory's lock, which the test run holds.
    manual_tool = os.path.join(os.path.dirname(BINARY), 'generate-manual')
    assert os.access(manual_tool, os.X_OK), f'{manual_tool} is missing: run Scripts/test (it builds it), or swift build --product generate-manual'
    result = install('--binary', BINARY, '--manual-tool', manual_tool)
    assert result.returncode == 0, result
    found = sorted(os.path.relpath(os.path.join(d, f), prefix) for d, _, files in os.walk(prefix) for f in files)
    print('installed:', ' '.join(found))
    for expected in ['bin/coordfs', 'bin/coordfs-full', 'sbin/mount.coordfs', 'lib/systemd/system/coordfs@.service',
                     'share/doc/coordfs/srv-data.mount', 'share/man/man1/coordfs.1', 'share/man/man1/coordfs.mount.1',
                     'share/man/man1/coordfs.exec.1', 'share/man/man1/coordfs.watch.1',
                     'share/bash-completion/completions/coordfs', 'share/zsh/site-functions/_coordfs',
                     'share/fish/vendor_completions.d/coordfs.fish']:
        assert expected in found, f'{expected} missing from {found}'

    program = os.path.join(prefix, 'bin', 'coordfs')
    assert subprocess.run([program, '--version'], capture_output=True, text=True).stdout.strip() == '0.1.0'
    assert os.path.realpath(os.path.join(prefix, 'sbin', 'mount.coordfs')) == os.path.realpath(program)
    # The launcher alone, without coordfs-full beside it, says what is missing in one line.
    alone = tempfile.mkdtemp(prefix='coordfs-alone-')
    try:
        shutil.copy(program, alone)
        result = subprocess.run([os.path.join(alone, 'coordfs'), '--version'], capture_output=True, text=True)
        assert result.returncode == 127 and result.stderr.count('\n') == 1, result
        assert result.stderr.startswith(f'coordfs: cannot run {alone}/coordfs-full: No such file or directory'), result
    finally:
        shutil.rmtree(alone, ignore_errors=True)
    unit = open(os.path.join(prefix, 'lib/systemd/system/coordfs@.service')).read()
    assert f'ExecStart={program} mount ' in unit, unit
    page = open(os.path.join(prefix, 'share/man/man1/coordfs.mount.1')).read()
    assert '.Dt COORDFS.MOUNT 1' in page and 'claim-timeout' in page, page[:400]
    if shutil.which('man'):
        rendered = subprocess.run(['man', '-l', os.path.join(prefix, 'share/man/man1/coordfs.mount.1')],
                                  capture_output=True, text=True, env=dict(os.environ, MANPAGER='cat', MANWIDTH='100'))
        assert rendered.returncode == 0 and 'claim-timeout' in rendered.stdout, rendered
    completion = subprocess.run(['bash', '-c', f'source {prefix}/share/bash-completion/completions/coordfs && complete -p coordfs'],
                                capture_output=True, text=True)
    assert completion.returncode == 0 and 'coordfs' in completion.stdout, completion
    assert "complete -c 'coordfs'" in open(os.path.join(prefix, 'share/fish/vendor_completions.d/coordfs.fish')).read()
    assert '#compdef coordfs' in open(os.path.join(prefix, 'share/zsh/site-functions/_coordfs')).read()
    print('each usable')

    result = install('--uninstall')
    assert result.returncode == 0, result
    left = [os.path.join(d, n) for d, dirs, files in os.walk(prefix) for n in dirs + files]
    assert not left, f'left behind: {left}'
    print('uninstalled: nothing left')
    result = install('--uninstall')
    assert result.returncode != 0 and 'nothing to uninstall' in result.stderr, result
finally:
    shutil.rmtree(prefix, ignore_errors=True)
