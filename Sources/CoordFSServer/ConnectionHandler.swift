import CoordFSProtocol
import NIOCore

/// The NIO side of a connection: bytes in, lines out to the session; back-pressure both ways.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let session: Session
    private var framer: LineFramer

    init(session: Session, maxLineBytes: Int) {
        self.session = session
        self.framer = LineFramer(maxLineBytes: maxLineBytes)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { framer.append($0) }
        while let frame = framer.next() {
            session.handle(frame)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        session.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        session.close()
        context.fireChannelInactive()
    }

    /// A client that does not read its replies is not read from either (its replies would
    /// pile up in memory); events keep going to its bounded queue and overflow there.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        _ = try? context.channel.syncOptions?.setOption(.autoRead, value: writable)
        if writable {
            context.read()
            session.writabilityChanged()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        session.context.logger.debug("control connection error", metadata: ["session": "\(session.id)", "error": "\(error)"])
        context.close(promise: nil)
    }
}
