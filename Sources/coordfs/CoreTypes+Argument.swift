import ArgumentParser
import CoordFSCore

// The core's option values, spelled on the command line by their raw values.
extension Durability: ExpressibleByArgument {}
extension WatchMethod: ExpressibleByArgument {}
extension VersionRetention.Thinning: ExpressibleByArgument {}
