import CoordFSCore
import CoordFSProtocol
@testable import CoordFSServer
import Testing

/// The one mapping between the core's types and the wire's (Conversions.swift).
@Suite struct ServerConversionTests {
    @Test func anOverflowSaysWhyOnlyWhenTheBackingWasLost() {
        #expect(OverflowMarker(EventOverflow(firstDropped: 131, lastDropped: 942, dropped: 812))
                    == OverflowMarker(dropped: 812, first: 131, last: 942))
        #expect(OverflowMarker(EventOverflow(firstDropped: 943, lastDropped: 942, dropped: 0, backingLost: true))
                    == OverflowMarker(dropped: 0, first: 943, last: 942, reason: .backing))
    }
}
