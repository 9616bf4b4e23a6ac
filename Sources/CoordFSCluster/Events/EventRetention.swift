// Retention: how long the events table keeps rows, and the trim that any host runs to
// keep it so.

/// How long the cluster's events table keeps rows: at most `rows` per cluster, none older than
/// `age`. A host whose cursor falls below what is kept (cut off from the database for longer)
/// gets a resync. Any host trims, every `trimInterval` on its own clock; trimming twice is
/// harmless.
public struct EventRetention: Sendable {
    public var rows: Int = 100_000
    public var age: Duration = .seconds(600)
    public var trimInterval: Duration = .seconds(30)

    public init() {}
}

extension ClusterEventThread {
    /// Deletes rows beyond the retention and raises the horizon to the last one deleted.
    func trim() throws(DatabaseError) {
        guard let connection else { return }
        try connection.execute("""
            WITH cut AS (
                SELECT greatest(
                    coalesce((SELECT max(cursor) FROM coordfs_events
                              WHERE cluster = $1 AND at < now() - $2::bigint * interval '1 millisecond'), 0),
                    coalesce((SELECT cursor FROM coordfs_events WHERE cluster = $1
                              ORDER BY cursor DESC OFFSET $3::bigint LIMIT 1), 0)) AS through),
            gone AS (
                DELETE FROM coordfs_events WHERE cluster = $1 AND cursor <= (SELECT through FROM cut) RETURNING cursor)
            INSERT INTO coordfs_event_horizon (cluster, trimmed_through)
            SELECT $1, max(cursor) FROM gone HAVING count(*) > 0
            ON CONFLICT (cluster) DO UPDATE
            SET trimmed_through = greatest(coordfs_event_horizon.trimmed_through, excluded.trimmed_through)
            """, [name, .integer(events.retention.age.milliseconds), .integer(Int64(events.retention.rows))])
    }
}
