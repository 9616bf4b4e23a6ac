import CoordFSCore
import Dispatch
import CoordFSProtocol
import SystemPackage
import Logging
import NIOCore

// A session's presenters: present, answer, unpresent, and the asks and notices pushed to them.
extension Session {
    func present(_ id: RequestID, _ body: Request.Present) {
        guard presenters.count < context.options.maxPresentersPerConnection else {
            return fail(id, .limit, "at most \(context.options.maxPresentersPerConnection) presenters per connection")
        }
        if let refusal = overUserLimit(\.presenters, \.presenters, "presenters") { return fail(id, .limit, refusal) }
        let path: MountPath
        switch admit(body.path) {
        case .failure(let detail): return fail(id, detail)
        case .success(let admitted): path = admitted
        }
        let answers = PresenterRequestKinds((body.answers ?? []).map(PresenterRequestKind.init))
        let context = self.context
        let sessionID = self.id
        let label = "session \(sessionID)" + (client.map { " (\($0))" } ?? "")
        // A presenter holds back only what its user could change itself; root's hold back anything.
        let peer = self.peer, access = gate.access
        let mayMake: (@Sendable (PresentedChange, MountPath) -> Bool)? = peer.uid == 0 ? nil : { @Sendable change, path in
            access.canMake(change, path, uid: peer.uid, gid: peer.gid, pid: peer.pid)
        }
        let registration = context.presenters.register(path, answers: answers, ownerPid: peer.pid, label: label,
                                                       user: context.isLimited(peer.uid) ? peer.uid : nil,
                                                       mayMake: mayMake) { message in
            context.eventLoop.execute {
                context.sessions[sessionID]?.presenterMessage(message)
            }
        }
        presenters[registration.id] = registration
        context.presenterSessions[registration.id] = sessionID
        reply(id, Request.Present.Reply(presenter: registration.id, path: path.filePath))
    }

    func presenterMessage(_ message: PresenterMessage) {
        guard !isClosed else { return }
        switch message {
        case .request(let request):
            guard gate.mayLearnAbout(request.path) else {
                // It may not know the item exists; it cannot have a stake in it.
                context.presenters.answer(request: request.id, presenter: request.presenter, ok: true)
                return
            }
            push(.ask(AskPush(request, now: ContinuousClock.now)))
        case .notification(let notification):
            guard gate.mayLearnAbout(notification.path) || notification.destination.map(gate.mayLearnAbout) == true else { return }
            push(.notify(NotifyPush(notification)))
        }
        flush()
    }

    func answer(_ id: RequestID, _ body: Request.Answer) {
        guard presenters[body.presenter] != nil else {
            return fail(id, .notFound, "no presenter \(body.presenter) on this connection")
        }
        let accepted = context.presenters.answer(request: body.request, presenter: body.presenter, ok: body.verdict == .ok,
                                                 reason: body.reason.map { String($0.prefix(512)) })
        reply(id, Request.Answer.Reply(accepted: accepted))
    }

    func unpresent(_ id: RequestID, _ body: Request.Unpresent) {
        guard let registration = presenters.removeValue(forKey: body.presenter) else {
            return fail(id, .notFound, "no presenter \(body.presenter) on this connection")
        }
        context.presenters.unregister(registration)
        context.presenterSessions[registration.id] = nil
        reply(id, Empty())
    }
}
