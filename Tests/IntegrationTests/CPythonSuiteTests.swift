import Foundation
import Testing

/// CPython's own regression tests of files (test_os, test_shutil, test_tempfile, test_io,
/// test_subprocess, test_zipfile, test_tarfile, test_mailbox, test_logging and more: Debian's
/// libpython3.11-testsuite) run twice at once, with their work directory and TMPDIR on the
/// mount and on a plain directory beside it. A test case that fails on the mount while it
/// passes on the plain directory fails this test, unless
/// `Scripts/CPythonSuiteTests/known-differences.txt` lists it with the README known
/// difference that explains it. The script prints both runs' counts and, for each
/// difference, the end of its traceback.
///
/// The suite loads both cores for a few minutes and some of its cases are about timing:
/// Scripts/test runs it alone, after the other suites.
@Suite(.serialized) struct CPythonSuiteTests {
    /// Debian's interpreter, whose test package this is (a python3.11 found on PATH may be
    /// another build, without Debian's tests beside it).
    static let python = "/usr/bin/python3.11"
    static let regrtest = "/usr/lib/python3.11/test/libregrtest"

    /// Also with `--versions`, whose capture paths (links into the store before commits, deletes
    /// as renames into it, clones and copies before in-place changes) every save, delete and
    /// rename of the suite goes through.
    @Test(arguments: [[], ["--versions", "--versions-copy-up-to", "1"]])
    func fileSystemTestsPassAsOnAPlainDirectory(options: [String]) throws {
        try #require(FileManager.default.fileExists(atPath: Self.python) && FileManager.default.fileExists(atPath: Self.regrtest),
                     "CPython's tests are missing: apt-get install python3.11 libpython3.11-testsuite (Scripts/test does)")
        try withMount(options) { scratch in
            let result = try run(["/usr/bin/python3", pythonScript("CPythonSuiteTests/fileSystemTestsPassAsOnAPlainDirectory"),
                                  "--python", Self.python, scratch.mountpoint, scratch.plain], in: scratch.root)
            print("CPythonSuiteTests \(options.joined(separator: " ")):\n" + result.output)
            #expect(result.status == 0, "\(result)")
        }
    }
}
