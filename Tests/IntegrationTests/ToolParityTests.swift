import Foundation
import Testing

/// Everyday tools run unmodified through the mount and on a plain directory: same output,
/// same errors, same resulting tree, byte for byte.
@Suite(.serialized) struct ToolParityTests {
    /// A source tree outside both directories: nested dirs, modes, a symlink, hard links,
    /// an empty file, a binary file, xattrs and fixed times.
    static func makeSourceTree(in scratch: Scratch) throws -> String {
        let source = scratch.root + "/src"
        let result = try shell("""
            set -e
            mkdir -p src/a/b/c src/empty
            printf 'hello\\n' > src/a/hello.txt
            head -c 300000 /dev/urandom > src/a/b/random.bin
            : > src/a/b/c/empty
            printf '#!/bin/sh\\necho hi\\n' > src/a/run.sh && chmod 755 src/a/run.sh
            printf 'secret' > src/a/private && chmod 600 src/a/private
            ln -s hello.txt src/a/link-to-hello
            ln -s ../nowhere src/a/dangling
            ln src/a/hello.txt src/a/b/hard-link
            setfattr -n user.color -v blue src/a/hello.txt
            find src -exec touch -h -d '2020-01-02 03:04:05.123456789' {} +
            """, in: scratch.root)
        #expect(result.status == 0, "\(result)")
        return source
    }

    static let withTimes = TreeSnapshot.Options(times: true)

    @Test func copyTreeWithCpArchive() throws {
        try withMount { scratch in
            let source = try Self.makeSourceTree(in: scratch)
            try expectParity("cp -a \(source) copy && cp -a copy copy2 && ls -lR --time-style=+%s copy | sort", in: scratch, snapshot: Self.withTimes)
        }
    }

    @Test func tarRoundTrip() throws {
        try withMount { scratch in
            let source = try Self.makeSourceTree(in: scratch)
            try expectParity("""
                set -e
                # pax headers carry atime, ctime and the pid unless told not to: keep archives reproducible
                pax='--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime'
                tar --xattrs --sort=name "$pax" -cf ../in-$$.tar -C \(source) .
                mkdir out && tar --xattrs -xpf ../in-$$.tar -C out
                tar --xattrs --sort=name "$pax" -cf - -C out . | md5sum
                tar --xattrs --sort=name "$pax" -cf archive.tar -C out . && tar -tvf archive.tar
                rm ../in-$$.tar
                """, in: scratch, snapshot: Self.withTimes)
        }
    }

    @Test func gitWorkflow() throws {
        try withMount { scratch in
            let environment = "GIT_AUTHOR_DATE='2020-01-01T00:00:00Z' GIT_COMMITTER_DATE='2020-01-01T00:00:00Z' HOME=$PWD"
            try expectParity("""
                set -e
                export \(environment)
                git config --global user.email coordfs@example.com && git config --global user.name coordfs
                git config --global init.defaultBranch main
                git init -q repo && cd repo
                printf 'one\\n' > a.txt && mkdir sub && printf 'two\\n' > sub/b.txt
                git add . && git commit -qm first
                git checkout -q -b topic
                printf 'three\\n' >> a.txt && git rm -q sub/b.txt && git add a.txt && git commit -qm second
                git checkout -q main
                git log --all --format='%H %s'
                git status --short --branch
                cat a.txt && ls sub
                git merge -q --ff-only topic && git log --format='%H %s' && ls
                git gc -q && git fsck --full 2>&1
                """, in: scratch, snapshot: .init(ignoringContents: ["repo/.git/index"]))
        }
    }

    @Test func sqliteWithTwoWriters() throws {
        try withMount { scratch in
            try expectParity("""
                set -e
                sqlite3 db 'create table t(x integer); pragma journal_mode=delete;' >/dev/null
                writer() { for i in $(seq $1 $2); do sqlite3 -cmd '.timeout 10000' db "insert into t values($i)"; done; }
                writer 1 60 & writer 61 120 & wait
                sqlite3 db 'select count(*), sum(x) from t; pragma integrity_check;'
                sqlite3 wal 'pragma journal_mode=wal; create table u(y); insert into u values(1),(2);'
                sqlite3 wal 'select sum(y) from u'
                """, in: scratch, compareTree: false)
        }
    }

    @Test func pythonFileOperations() throws {
        try withMount { scratch in
            try expectParity("/usr/bin/python3 \(shellQuoted(pythonScript("ToolParityTests/pythonFileOperations")))\n", in: scratch)
        }
    }

    @Test func sedInPlace() throws {
        try withMount { scratch in
            try expectParity("""
                set -e
                printf 'alpha\\nbeta\\ngamma\\n' > f && chmod 640 f
                sed -i 's/beta/BETA/' f && sed -i.bak '1d' f
                cat f f.bak
                """, in: scratch)
        }
    }

    @Test func rsyncArchive() throws {
        try withMount { scratch in
            let source = try Self.makeSourceTree(in: scratch)
            try expectParity("""
                set -e
                rsync -aHX \(source)/ copy/
                printf 'changed\\n' > copy/a/run.sh && touch -d '2021-01-01' copy/a/run.sh
                rsync -aHX --delete --itemize-changes \(source)/ copy/ | sort
                """, in: scratch, snapshot: Self.withTimes)
        }
    }

    @Test func moveAndRemoveTrees() throws {
        try withMount { scratch in
            let source = try Self.makeSourceTree(in: scratch)
            try expectParity("""
                set -e
                cp -a \(source) t1 && mv t1 t2 && mkdir t3 && mv t2 t3/ && mv t3/t2/a t3/a-moved
                rm -r t3/t2 && cp -a \(source) t4 && rm -rf t4/a/b
                mkdir -p x/y && mv x t3/ && ls -R t3 | head -50
                """, in: scratch, snapshot: Self.withTimes)
        }
    }

    @Test func linksAndLinkCounts() throws {
        try withMount { scratch in
            try expectParity("""
                set -e
                echo data > a && ln a b && ln b c && stat -c '%h %s' a
                rm b && stat -c '%h' a c && mv c d && stat -c '%h' a d
                ln -s a sym && ln -s /nonexistent dangling && ln -sf d sym
                readlink sym dangling && cat sym
                mkdir dir && stat -c '%h' . dir && mkdir dir/sub && stat -c '%h' dir && rmdir dir/sub && stat -c '%h' dir
                """, in: scratch)
        }
    }

    @Test func specialFilesAndTimes() throws {
        try withMount { scratch in
            try expectParity("""
                set -e
                mkfifo pipe && stat -c '%F %a' pipe
                touch -d '2001-02-03 04:05:06.123456789' f && stat -c '%y %x' f
                touch -m -d '@1000000000.5' f && stat -c '%Y %X' f
                touch -a -d '@1200000000' f && stat -c '%Y %X' f
                (echo x > pipe &) && cat pipe
                """, in: scratch, snapshot: Self.withTimes)
        }
    }

    @Test func extendedAttributes() throws {
        try withMount { scratch in
            try expectParity("""
                set -e
                echo x > f && mkdir d
                setfattr -n user.one -v 1 f && setfattr -n user.two -v "two words" f && setfattr -n user.dir -v yes d
                getfattr -d f d
                setfattr -x user.one f && getfattr -d f
                getfattr -n user.missing f 2>&1 || echo "status $?"
                setfattr -x user.missing f 2>&1 || echo "status $?"
                """, in: scratch)
        }
    }

    @Test func flockContention() throws {
        try withMount { scratch in
            try expectParity("""
                echo x > lock
                flock lock -c 'touch held; while [ ! -e release ]; do sleep 0.05; done; rm held release' &
                while [ ! -e held ]; do sleep 0.05; done
                flock -n lock -c 'echo got it' ; echo "nonblocking: $?"
                (sleep 0.3; touch release) &
                flock -w 20 lock -c 'echo waited' ; echo "waiting: $?"
                wait
                """, in: scratch)
        }
    }

    /// More files than the mount may keep nodes for: the kernel is asked to forget some, and
    /// nothing fails with EMFILE (each node holds a descriptor; the limit is 20,000 here).
    @Test func moreFilesThanTheNodeBudget() throws {
        try withMount(["--max-nodes", "100"]) { scratch in
            try expectParity("""
                set -e
                mkdir -p tree/a tree/b
                for i in $(seq 1 1500); do echo "$i" > tree/a/f$i; done
                for i in $(seq 1 300); do mkdir tree/b/d$i && echo "$i" > tree/b/d$i/g; done
                find tree | wc -l && cat tree/a/f1 tree/a/f1500 tree/b/d7/g
                mv tree/a tree/c && cat tree/c/f42 && du -s --apparent-size tree | cut -f1
                rm -r tree/b && ls tree/c | wc -l
                """, in: scratch)
            // The budget holds: the daemon's descriptors stay near 100 (plus a /dev/fuse clone per
            // worker thread and a few of its own), not one per file seen.
            let descriptors = { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(scratch.daemonID ?? 0)/fd").count) ?? 0 }
            #expect(eventually { descriptors() <= 160 }, "the daemon holds \(descriptors()) descriptors")
        }
    }
}
