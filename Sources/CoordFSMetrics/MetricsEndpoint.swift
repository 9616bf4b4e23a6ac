import Glibc
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus

/// The HTTP/1.1 endpoint Prometheus scrapes: `GET /metrics` answers the registry in the text
/// exposition format; every other path is 404. One event-loop thread serves it, so scrapes
/// run one at a time, off the FUSE workers.
public final class MetricsEndpoint: Sendable {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel
    public let address: MetricsAddress

    private init(group: MultiThreadedEventLoopGroup, listener: any Channel, address: MetricsAddress) {
        self.group = group
        self.listener = listener
        self.address = address
    }

    /// Listens on `address`; fails (with the reason, such as the port being in use) rather
    /// than mount without the metrics that were asked for. `update` runs before each scrape.
    public static func start(_ address: MetricsAddress, registry: PrometheusCollectorRegistry,
                             update: @escaping @Sendable () -> Void, logger: Logger) throws(MetricsEndpointError) -> MetricsEndpoint {
        let render: @Sendable () -> [UInt8] = {
            update()
            return registry.emitToBuffer()
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ScrapeHandler(render: render))
                }
            }
        do {
            let listener = try bootstrap.bind(host: address.host, port: address.port).wait()
            logger.info("serving metrics", metadata: ["address": "http://\(address)/metrics"])
            return MetricsEndpoint(group: group, listener: listener, address: address)
        } catch {
            try? group.syncShutdownGracefully()
            throw MetricsEndpointError("cannot serve metrics on \(address): \(Self.reason(error))")
        }
    }

    public func stop() {
        try? listener.close().wait()
        try? group.syncShutdownGracefully()
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}

public struct MetricsEndpointError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Answers one connection's requests in order (keep-alive as the client asks).
private final class ScrapeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let render: @Sendable () -> [UInt8]
    private var head: HTTPRequestHead?

    init(render: @escaping @Sendable () -> [UInt8]) {
        self.render = render
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let status: HTTPResponseStatus
        let contentType: String
        var body: [UInt8]
        if path != "/metrics" {
            (status, contentType, body) = (.notFound, "text/plain; charset=utf-8", Array("not found: metrics are at /metrics\n".utf8))
        } else if head.method != .GET && head.method != .HEAD {
            (status, contentType, body) = (.methodNotAllowed, "text/plain; charset=utf-8", Array("only GET\n".utf8))
        } else {
            (status, contentType, body) = (.ok, MetricsEndpoint.contentType, render())
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: "\(body.count)")
        if status == .methodNotAllowed { headers.add(name: "Allow", value: "GET, HEAD") }
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        if head.method == .HEAD { body = [] }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
