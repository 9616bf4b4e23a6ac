/// What one user may keep in the daemon at once, over all its connections: so that a user
/// with access to a shared socket cannot exhaust the daemon's memory or descriptors. Root and
/// the user who mounted are bound only by the per-connection limits.
public struct UserLimits: Sendable, Hashable, Codable {
    public var connections: Int
    public var subscriptions: Int
    public var presenters: Int
    /// Explicit claims held or waiting.
    public var claims: Int
    /// Presenter asks sent to the user's presenters and not answered yet; beyond it, its
    /// presenters are skipped (as a silent presenter is).
    public var asks: Int

    public init(connections: Int = 64, subscriptions: Int = 1024, presenters: Int = 256, claims: Int = 1024, asks: Int = 256) {
        self.connections = connections
        self.subscriptions = subscriptions
        self.presenters = presenters
        self.claims = claims
        self.asks = asks
    }

    /// The names `--user-limit KIND=N` takes, as status spells the fields.
    public static let names = ["connections", "subscriptions", "presenters", "claims", "asks"]

    /// Sets the limit `name` names; false for a name that is none of `names`.
    public mutating func set(_ name: String, to value: Int) -> Bool {
        switch name {
        case "connections": connections = value
        case "subscriptions": subscriptions = value
        case "presenters": presenters = value
        case "claims": claims = value
        case "asks": asks = value
        default: return false
        }
        return true
    }
}

/// What one user keeps in the daemon now (status: root sees every user, others themselves).
public struct UserUsage: Sendable, Hashable, Codable {
    public var uid: UInt32
    public var connections: Int
    public var subscriptions: Int
    public var presenters: Int
    public var claims: Int
    /// Whether `UserLimits` apply to it (not to root and the user who mounted).
    public var limited: Bool

    public init(uid: UInt32, connections: Int, subscriptions: Int, presenters: Int, claims: Int, limited: Bool) {
        self.uid = uid
        self.connections = connections
        self.subscriptions = subscriptions
        self.presenters = presenters
        self.claims = claims
        self.limited = limited
    }
}
