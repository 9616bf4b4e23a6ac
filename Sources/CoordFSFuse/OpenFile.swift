import CFuse
import Glibc
import Synchronization
import CoordFSCore
import SystemPackage

/// A file opened through the mount.
///
/// Readers of the committed version read through `own`, the descriptor of the version that was
/// committed when they opened. Writers (and the owner's readers while its save lasts) go
/// through `save`. In-place writers and special files write through `own` directly.
/// Sendable: immutable but for an atomic flag.
final class OpenFile: KernelHandle, Sendable {
    let node: Node
    let own: SharedDescriptor?
    let save: Save?
    let isWriter: Bool
    let appends: Bool
    let usesPageCache: Bool
    /// Held until release: a writer's write claim, or a strict reader's read claim (with other
    /// hosts' coverage of it, which a save's commit checks: fencing).
    let claims: HeldClaims?
    /// Set when an in-place handle wrote: its release is a `changed` event.
    let wroteInPlace = Atomic<Bool>(false)
    /// The owner, for a reader of the committed version counted among the page-cache readers.
    let cachedReader: ClaimOwner?
    /// Set when a reader around the page cache mapped the file and was counted among the
    /// page-cache readers from then on (see `pageCacheSource`).
    let joinedCachedReaders = Atomic<Bool>(false)
    /// Who opened it: the origin of changes that land at its release.
    let origin: ChangeOrigin
    /// Presenters that stepped aside for this open, told to reacquire at its release.
    let consent: PresenterConsent

    init(node: Node, own: SharedDescriptor?, save: Save?, isWriter: Bool, appends: Bool, usesPageCache: Bool, claims: HeldClaims?,
         origin: ChangeOrigin, consent: PresenterConsent = .nobodyAsked, cachedReader: ClaimOwner? = nil) {
        self.node = node
        self.cachedReader = cachedReader
        self.origin = origin
        self.consent = consent
        self.own = own
        self.save = save
        self.isWriter = isWriter
        self.appends = appends
        self.usesPageCache = usesPageCache
        self.claims = claims
    }

    /// The descriptor reads go to now; hold it for the read's duration.
    var readable: SharedDescriptor { save?.current ?? own! }

    /// The attributes of the version this handle reads (see `Save.currentStatus`).
    func readableStatus() throws(Errno) -> stat {
        if let save { return try save.currentStatus() }
        return try Syscall.stat(own!.raw)
    }
}

/// The parts of a `fuse_file_info` an operation needs after the callback returned (libfuse's
/// copy lives on the worker's stack).
struct FileInfoCopy: @unchecked Sendable {
    var info: fuse_file_info
}
