/// The server-side half of grants: plpgsql functions installed beside the tables, so that each
/// grant change is one round trip and one transaction.
///
/// Every function that changes grants or requests first takes the transaction-level advisory
/// lock on the cluster's `lockKey` (the one-bigint form, a lock space apart from the hosts'
/// two-int liveness locks): grant changes of a cluster happen one at a time, in one order, and
/// every statement after the lock sees the changes committed before it (READ COMMITTED takes a
/// fresh snapshot per statement of a volatile function).
///
/// Paths are `MountPath.bytes` ("/" for the root, "/a/b" below it), passed as hex text arrays
/// (libpq's binary form is used for single values only). Modes are `ClaimMode` raw values
/// (0 snapshot-read, 1 read, 2 write, 3 exclusive).
///
/// Rows the functions return share one shape (`o_kind`, `o_host`, `o_path`, `o_mode`,
/// `o_ticket`, `o_label`):
/// - `granted`: this host now holds `o_path` in `o_mode`;
/// - `ticket`: the request is queued under `o_ticket`;
/// - `holder`: host `o_host` (`o_label` "hostname (pid N)") holds a conflicting grant;
/// - `ahead`: host `o_host` queued a conflicting request earlier;
/// - `waiting`: another host's queued request (the recall list), in ticket order.
enum GrantFunctions {
    private static let rowShape = "TABLE (o_kind text, o_host bigint, o_path bytea, o_mode smallint, o_ticket bigint, o_label text)"

    /// Other hosts' queued requests, as `waiting` rows.
    private static let waitingRows = """
        RETURN QUERY SELECT 'waiting'::text, q.host_id, q.path, q.mode, q.ticket, NULL::text
            FROM coordfs_requests q WHERE q.cluster = p_cluster AND q.host_id <> p_host ORDER BY q.ticket;
        """

    /// `p` is `a` or lies beneath it. The root ("/") holds everything; elsewhere a prefix
    /// must end at a component boundary ("/ab" is not beneath "/a"). The version index uses it too.
    static let within = """
        CREATE OR REPLACE FUNCTION coordfs_within(p bytea, a bytea) RETURNS boolean
        LANGUAGE sql IMMUTABLE AS $$
            SELECT a = '/'::bytea OR p = a
                OR (length(p) > length(a) AND substring(p FROM 1 FOR length(a) + 1) = a || '/'::bytea)
        $$
        """

    static let statements: [String] = [
        within,
        """
        CREATE OR REPLACE FUNCTION coordfs_overlap(p bytea, q bytea) RETURNS boolean
        LANGUAGE sql IMMUTABLE AS $$ SELECT coordfs_within(p, q) OR coordfs_within(q, p) $$
        """,
        // ClaimMode.isCompatible's matrix, negated.
        """
        CREATE OR REPLACE FUNCTION coordfs_conflict(m smallint, n smallint) RETURNS boolean
        LANGUAGE sql IMMUTABLE AS $$ SELECT m = 3 OR n = 3 OR (m > 0 AND n > 0 AND NOT (m = 1 AND n = 1)) $$
        """,
        // Deletes the hosts whose liveness lock nobody holds, with their grants and requests,
        // and wakes the waiters. The liveness test runs without the lock first, so a heartbeat
        // that finds no dead host orders nothing. A host whose session ended is reaped only
        // once the lease of its last proof is over: its session may have been ended by the
        // server (a restart, pg_terminate_backend) while the host, not knowing it yet, still
        // trusts its grants, and nobody may be granted what it may still write.
        """
        CREATE OR REPLACE FUNCTION coordfs_reap(p_cluster text, p_key int, p_channel text) RETURNS int
        LANGUAGE plpgsql AS $$
        DECLARE
            dead bigint[];
        BEGIN
            SELECT array_agg(h.host_id) INTO dead FROM coordfs_hosts h
                WHERE h.cluster = p_cluster AND NOT \(HostRegistration.leaseRunsCondition)
                    AND NOT \(HostRegistration.isAliveCondition(hostColumn: "h.host_id", keyParameter: "p_key"));
            IF dead IS NULL THEN RETURN 0; END IF;
            PERFORM pg_advisory_xact_lock(p_key::bigint);
            DELETE FROM coordfs_grants g WHERE g.cluster = p_cluster AND g.host_id = ANY(dead);
            DELETE FROM coordfs_requests q WHERE q.cluster = p_cluster AND q.host_id = ANY(dead);
            DELETE FROM coordfs_hosts h WHERE h.cluster = p_cluster AND h.host_id = ANY(dead);
            PERFORM pg_notify(p_channel, 'changed');
            RETURN cardinality(dead);
        END $$
        """,
        // The heartbeat: proves the host's session (`proved_at`, by the server's clock, no
        // earlier than the host sent it) and reaps the dead.
        """
        CREATE OR REPLACE FUNCTION coordfs_heartbeat(p_cluster text, p_key int, p_channel text, p_host bigint) RETURNS int
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE coordfs_hosts SET proved_at = now() WHERE cluster = p_cluster AND host_id = p_host;
            RETURN coordfs_reap(p_cluster, p_key, p_channel);
        END $$
        """,
        // Asks for all of an operation's requests at once. Blocked (another live host holds a
        // conflicting grant, or queued a conflicting request earlier than this one: first come,
        // first served across hosts): the requests are queued (once: a retry passes its
        // tickets) and the grant holders are told to recall. A nonblocking request behind an
        // earlier request is not queued (it would wait); one blocked by grants alone is, since
        // the holder may merely cache a grant it does not use: it answers the recall, and the
        // asking host decides then. Free: each request is granted on the widest ancestor of its path (the root
        // first) that no other host's grant or queued request conflicts with, so this host's
        // later operations there need no round trip.
        """
        CREATE OR REPLACE FUNCTION coordfs_acquire(p_cluster text, p_key int, p_channel text, p_host bigint,
            p_fence bigint, p_paths text[], p_modes smallint[], p_tickets bigint[], p_nonblocking boolean, p_recall boolean)
        RETURNS \(rowShape)
        LANGUAGE plpgsql AS $$
        DECLARE
            paths bytea[];
            first_ticket bigint;
            by_grant bigint[];
            by_request bigint[];
            attempt int;
            j int;
            v_path bytea;
            v_mode smallint;
            v_candidate bytea;
            v_length int;
            v_slash int;
            v_ticket bigint;
        BEGIN
            PERFORM pg_advisory_xact_lock(p_key::bigint);
            paths := ARRAY(SELECT decode(u.h, 'hex') FROM unnest(p_paths) WITH ORDINALITY AS u(h, n) ORDER BY u.n);
            first_ticket := coalesce((SELECT min(t) FROM unnest(p_tickets) t), 9223372036854775807);
            FOR attempt IN 1..2 LOOP
                SELECT array_agg(DISTINCT g.host_id) INTO by_grant
                    FROM coordfs_grants g, unnest(paths, p_modes) AS r(p, m)
                    WHERE g.cluster = p_cluster AND g.host_id <> p_host
                        AND coordfs_overlap(g.path, r.p) AND coordfs_conflict(g.mode, r.m);
                SELECT array_agg(DISTINCT q.host_id) INTO by_request
                    FROM coordfs_requests q, unnest(paths, p_modes) AS r(p, m)
                    WHERE q.cluster = p_cluster AND q.host_id <> p_host AND q.ticket < first_ticket
                        AND coordfs_overlap(q.path, r.p) AND coordfs_conflict(q.mode, r.m);
                EXIT WHEN by_grant IS NULL AND by_request IS NULL;
                -- A holder may be dead: reap, and look once more.
                EXIT WHEN attempt = 2 OR coordfs_reap(p_cluster, p_key, p_channel) = 0;
            END LOOP;
            IF by_grant IS NOT NULL OR by_request IS NOT NULL THEN
                IF (NOT p_nonblocking OR by_request IS NULL) AND cardinality(p_tickets) = 0 THEN
                    FOR j IN 1..cardinality(paths) LOOP
                        INSERT INTO coordfs_requests (cluster, host_id, path, mode)
                            VALUES (p_cluster, p_host, paths[j], p_modes[j]) RETURNING coordfs_requests.ticket INTO v_ticket;
                        RETURN QUERY SELECT 'ticket'::text, p_host, NULL::bytea, NULL::smallint, v_ticket, NULL::text;
                    END LOOP;
                    IF by_grant IS NOT NULL THEN
                        PERFORM pg_notify(p_channel, 'recall ' || array_to_string(by_grant, ' '));
                    END IF;
                ELSIF p_recall AND by_grant IS NOT NULL AND cardinality(p_tickets) > 0 THEN
                    -- Asked again by the heartbeat: tell the holders once more, should a
                    -- recall have gone astray.
                    PERFORM pg_notify(p_channel, 'recall ' || array_to_string(by_grant, ' '));
                END IF;
                RETURN QUERY SELECT CASE WHEN h.host_id = ANY(by_grant) THEN 'holder' ELSE 'ahead' END, h.host_id,
                        NULL::bytea, NULL::smallint, NULL::bigint, h.hostname || ' (pid ' || h.pid || ')'
                    FROM coordfs_hosts h WHERE h.cluster = p_cluster
                        AND h.host_id = ANY(coalesce(by_grant, '{}'::bigint[]) || coalesce(by_request, '{}'::bigint[]));
            ELSE
                FOR j IN 1..cardinality(paths) LOOP
                    v_path := paths[j];
                    v_mode := p_modes[j];
                    v_candidate := '/'::bytea;
                    v_length := 0;
                    LOOP
                        EXIT WHEN NOT EXISTS (SELECT 1 FROM coordfs_grants g WHERE g.cluster = p_cluster AND g.host_id <> p_host
                                    AND coordfs_overlap(g.path, v_candidate) AND coordfs_conflict(g.mode, v_mode))
                            AND NOT EXISTS (SELECT 1 FROM coordfs_requests q WHERE q.cluster = p_cluster AND q.host_id <> p_host
                                    AND coordfs_overlap(q.path, v_candidate) AND coordfs_conflict(q.mode, v_mode));
                        EXIT WHEN v_candidate = v_path;
                        -- One component deeper: up to the next "/" after this prefix, or the whole path.
                        v_slash := position('/'::bytea IN substring(v_path FROM v_length + 2));
                        IF v_slash = 0 THEN
                            v_candidate := v_path;
                        ELSE
                            v_length := v_length + v_slash;
                            v_candidate := substring(v_path FROM 1 FOR v_length);
                        END IF;
                    END LOOP;
                    INSERT INTO coordfs_grants (cluster, host_id, path, mode, fence)
                        VALUES (p_cluster, p_host, v_candidate, v_mode, p_fence) ON CONFLICT DO NOTHING;
                    RETURN QUERY SELECT 'granted'::text, p_host, v_candidate, v_mode, NULL::bigint, NULL::text;
                END LOOP;
                DELETE FROM coordfs_requests q WHERE q.cluster = p_cluster AND q.host_id = p_host AND q.ticket = ANY(p_tickets);
            END IF;
            \(waitingRows)
        END $$
        """,
        // A recall: gives back grants, keeping in their place the (narrower) grants the host's
        // operations still stand on, in one transaction; wakes the waiters.
        """
        CREATE OR REPLACE FUNCTION coordfs_replace(p_cluster text, p_key int, p_channel text, p_host bigint,
            p_fence bigint, p_drop_paths text[], p_drop_modes smallint[], p_add_paths text[], p_add_modes smallint[])
        RETURNS \(rowShape)
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(p_key::bigint);
            DELETE FROM coordfs_grants g USING unnest(p_drop_paths, p_drop_modes) AS d(h, m)
                WHERE g.cluster = p_cluster AND g.host_id = p_host AND g.path = decode(d.h, 'hex') AND g.mode = d.m;
            INSERT INTO coordfs_grants (cluster, host_id, path, mode, fence)
                SELECT p_cluster, p_host, decode(a.h, 'hex'), a.m, p_fence FROM unnest(p_add_paths, p_add_modes) AS a(h, m)
                ON CONFLICT DO NOTHING;
            PERFORM pg_notify(p_channel, 'changed ' || p_host);
            \(waitingRows)
        END $$
        """,
        // Takes queued requests back (a cancel, a deadline) and wakes the requests behind them.
        """
        CREATE OR REPLACE FUNCTION coordfs_withdraw(p_cluster text, p_key int, p_channel text, p_host bigint, p_tickets bigint[])
        RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(p_key::bigint);
            DELETE FROM coordfs_requests q WHERE q.cluster = p_cluster AND q.host_id = p_host AND q.ticket = ANY(p_tickets);
            PERFORM pg_notify(p_channel, 'changed ' || p_host);
        END $$
        """,
        // A recalled host's answer when it gave nothing back: its uses still conflict.
        """
        CREATE OR REPLACE FUNCTION coordfs_answer(p_channel text, p_host bigint) RETURNS void
        LANGUAGE sql AS $$ SELECT pg_notify(p_channel, 'changed ' || p_host) $$
        """,
        // Other hosts' queued requests, for a host told to recall.
        """
        CREATE OR REPLACE FUNCTION coordfs_waiting(p_cluster text, p_host bigint)
        RETURNS \(rowShape)
        LANGUAGE plpgsql AS $$
        BEGIN
            \(waitingRows)
        END $$
        """,
        // A clean leave: the host's grants, requests and row go, and the waiters wake.
        """
        CREATE OR REPLACE FUNCTION coordfs_leave(p_cluster text, p_key int, p_channel text, p_host bigint)
        RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(p_key::bigint);
            DELETE FROM coordfs_grants g WHERE g.cluster = p_cluster AND g.host_id = p_host;
            DELETE FROM coordfs_requests q WHERE q.cluster = p_cluster AND q.host_id = p_host;
            DELETE FROM coordfs_hosts h WHERE h.cluster = p_cluster AND h.host_id = p_host;
            PERFORM pg_notify(p_channel, 'changed ' || p_host);
        END $$
        """,
    ]
}
