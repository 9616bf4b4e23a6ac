import ArgumentParser
import CoordFSExec
@testable import coordfs
import Testing

/// `exec` reads its usual command lines without ArgumentParser (start-up time); whatever it
/// takes that way must mean exactly what ArgumentParser makes of it, and everything else must
/// be left to ArgumentParser.
struct ExecArgumentsTests {
    /// The fields both ways, side by side.
    private func fields(_ exec: ExecRequest) -> [String] {
        [exec.readPaths.description, exec.writePaths.description, String(describing: exec.wait), "\(exec.nonblock)",
         "\(exec.conflictExitCode)", "\(exec.verbose)", exec.command.description]
    }

    @Test(arguments: [
        ["--write", "f", "--", "true"],
        ["--write=f", "--", "true"],
        ["--read", "a", "--write", "b", "--read=c", "--", "sh", "-c", "exit 3"],
        ["-n", "--write", "f", "--", "true"],
        ["--nonblock", "-E", "75", "--write", "f", "--", "echo", "--", "-x"],
        ["--conflict-exit-code=0", "--read", "f", "-v", "--", "cat", "f"],
        ["-w", "0.3", "--read", "f", "--", "true"],
        ["--wait=2", "--verbose", "--write", "f", "--", "true"],
        ["--read", "a=b", "--", "true"],
        ["--write", "\u{0}0", "--", "true"],
    ])
    func plainFormsMeanWhatArgumentParserMakesOfThem(arguments: [String]) throws {
        let quick = try #require(ExecRequest.parsedQuickly(arguments))
        let parsed = try Exec.parse(arguments)
        #expect(fields(quick) == fields(parsed.request))
    }

    @Test(arguments: [
        [],
        ["--help"],
        ["-h"],
        ["--write", "f"],
        ["--write", "f", "--"],
        ["--", "true"],
        ["-nv", "--write", "f", "--", "true"],
        ["--write", "-f", "--", "true"],
        ["--write", "--", "true"],
        ["--write=", "--", "true"],
        ["--write", "f", "extra", "--", "true"],
        ["--wait", "1", "--wait", "2", "--write", "f", "--", "true"],
        ["--wait", "soon", "--write", "f", "--", "true"],
        ["--wait", "-1", "--write", "f", "--", "true"],
        ["--wait", "inf", "--write", "f", "--", "true"],
        ["--wait", "1", "--nonblock", "--write", "f", "--", "true"],
        ["-E", "256", "--write", "f", "--", "true"],
        ["-n", "-n", "--write", "f", "--", "true"],
        ["--nonblock=true", "--write", "f", "--", "true"],
        ["-w=1", "--write", "f", "--", "true"],
        ["--writ", "f", "--", "true"],
    ])
    func everythingElseGoesToArgumentParser(arguments: [String]) {
        #expect(ExecRequest.parsedQuickly(arguments) == nil)
    }
}
