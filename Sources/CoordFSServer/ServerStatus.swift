import CoordFSCore
import CoordFSProtocol

extension ServerContext {
    /// Everything going on in the mount, as `viewer`'s user may see it (the `status` request).
    func status(for viewer: Session) -> StatusReport {
        let now = ContinuousClock.now
        let gate = viewer.gate
        let visible: (MountPath) -> Bool = { gate.mayLearnAbout($0) }
        let statistics = hub.statistics()
        let ordered = sessions.values.sorted { $0.id < $1.id }

        var subscribers: [StatusReport.Subscriber] = []
        for session in ordered {
            for (wireID, subscription) in session.subscriptions.sorted(by: { $0.key < $1.key }) {
                let stats = subscription.events.statistics()
                guard visible(stats.path) else { continue }
                subscribers.append(.init(session: session.id, subscription: wireID, path: stats.path.filePath,
                                         recursive: stats.recursive, kinds: stats.kinds.kinds.map(EventKind.init),
                                         queued: stats.queued, capacity: stats.capacity, delivered: stats.delivered,
                                         dropped: stats.dropped, overflows: stats.overflows))
            }
        }
        let presenterList = presenters.presenters().filter { visible($0.info.path) }.map { status in
            StatusReport.Presenter(presenter: status.info.id, session: presenterSessions[status.info.id],
                                   path: status.info.path.filePath, answers: status.info.answers.kinds.map(AskKind.init),
                                   pid: status.info.ownerPid, pending: status.pending, asked: status.asked,
                                   answered: status.answered, timedOut: status.timedOut, refused: status.refused,
                                   unresponsive: status.unresponsive)
        }
        let requests = presenters.pendingRequests().filter { visible($0.path) }.map {
            StatusReport.PresenterRequest(request: $0.id, kind: AskKind($0.kind), path: $0.path.filePath,
                                          requester: $0.requester, awaiting: $0.awaiting, waiting: $0.waiting.seconds)
        }
        let table = claims.snapshot()
        let held = table.holders.filter { visible($0.path) }.map { ClaimHolderRecord($0, now: now) }
        let waiting = table.waiters.filter { $0.requests.allSatisfy { visible($0.path) } }.map {
            StatusReport.ClaimWaiter($0, now: now)
        }
        return StatusReport(
            server: .init(name: options.serverName, version: ProtocolVersion.current, socket: socketPath,
                          uptime: (now - started).seconds, connections: sessions.count, watch: options.backingWatch),
            connections: ordered.map { .init(session: $0.id, pid: $0.peer.pid, uid: $0.peer.uid, client: $0.client,
                                             age: (now - $0.connected).seconds) },
            events: .init(sequence: statistics.sequence, oldest: statistics.oldestInHistory, history: statistics.historyCount,
                          historyCapacity: statistics.historyCapacity, historyBytes: statistics.historyBytes,
                          historyByteCapacity: statistics.historyByteCapacity, subscribers: statistics.subscribers,
                          dropped: statistics.dropped, overflows: statistics.overflows),
            subscribers: subscribers, presenters: presenterList, presenterRequests: requests,
            claims: .init(held: held, waiting: waiting, broken: claims.recentBreaks.filter { $0.holds.contains { visible($0.path) } }.map {
                StatusReport.ClaimBreakRecord(owner: ClaimOwnerRecord($0.owner), uid: $0.user,
                                              paths: $0.holds.filter { visible($0.path) }.map(\.path.filePath),
                                              by: ClaimOwnerRecord($0.brokenBy), byUid: $0.brokenByUser,
                                              waited: $0.waited.seconds, ago: (now - $0.at).seconds)
            }),
            userLimits: options.perUser,
            users: Set(sessions.values.map(\.peer.uid)).sorted()
                .filter { viewer.peer.uid == 0 || viewer.peer.uid == ownerUID || $0 == viewer.peer.uid }
                .map { usage(of: $0) },
            versions: versions.map { store in
                let summary = store.summary()
                return StatusReport.VersionStore(versions: summary.versions, files: summary.files, bytes: summary.bytes, paused: summary.paused)
            })
    }
}

extension AccessGate {
    /// The cluster's part of status without the grants and requests on paths the viewer could
    /// not see (as for this host's claims).
    func visible(_ cluster: StatusReport.Cluster) -> StatusReport.Cluster {
        let mayLearn: (StatusReport.HostClaim) -> Bool = { claim in
            MountPath(bytes: WirePath.bytes(of: claim.path)).map(self.mayLearnAbout) ?? false
        }
        var shown = cluster
        shown.held = cluster.held.filter(mayLearn)
        shown.waiting = cluster.waiting.filter(mayLearn)
        return shown
    }
}
