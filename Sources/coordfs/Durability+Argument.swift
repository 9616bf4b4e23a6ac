import ArgumentParser
import CoordFSCore

extension Durability: ExpressibleByArgument {}
