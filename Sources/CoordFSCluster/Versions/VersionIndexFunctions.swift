/// The tables of the cluster's version index (`ClusterVersionIndex`), and the plpgsql
/// functions that make each change a save or a rename waits for one round trip.
///
/// - `coordfs_version_files`: one row per file with versions, with its path in the mount now
///   (or where it was deleted). A file keeps its row through saves and renames.
/// - `coordfs_versions`: one row per kept version; its id names its file in the store's
///   `objects` folder (one sequence for every cluster sharing the database, so ids never meet
///   in a store either).
///
/// Paths are `MountPath.bytes`, compared bytewise (bytea), so the paths beneath `/a` are the
/// range from `/a/` up to `/a0` and the index on paths serves it. Every change first takes
/// the cluster's version lock (`coordfs_versions_lock`), so the lookup of a path's live file
/// and the insertion of one never interleave across hosts.
enum VersionIndexFunctions {
    static let statements: [String] = [
        """
        CREATE TABLE IF NOT EXISTS coordfs_version_files (
            id bigserial PRIMARY KEY,
            cluster text NOT NULL,
            path bytea NOT NULL,
            deleted boolean NOT NULL DEFAULT false
        )
        """,
        """
        CREATE INDEX IF NOT EXISTS coordfs_version_files_by_path ON coordfs_version_files (cluster, path, deleted)
        """,
        // One live file per path, enforced: an index from before the rule on renames over stale
        // records may hold two, of which the newer stays live (the one a record went to).
        """
        UPDATE coordfs_version_files AS older SET deleted = true
        WHERE NOT deleted AND EXISTS (SELECT 1 FROM coordfs_version_files AS newer
            WHERE newer.cluster = older.cluster AND newer.path = older.path AND NOT newer.deleted AND newer.id > older.id)
        """,
        """
        CREATE UNIQUE INDEX IF NOT EXISTS coordfs_version_files_live_by_path ON coordfs_version_files (cluster, path) WHERE NOT deleted
        """,
        """
        CREATE TABLE IF NOT EXISTS coordfs_versions (
            id bigserial PRIMARY KEY,
            cluster text NOT NULL,
            file bigint NOT NULL REFERENCES coordfs_version_files (id),
            path bytea NOT NULL,
            size bigint NOT NULL,
            modified bigint NOT NULL,
            kept bigint NOT NULL,
            kind text NOT NULL,
            pid int NOT NULL,
            uid bigint NOT NULL,
            process text,
            host text,
            mode bigint NOT NULL,
            resolved boolean NOT NULL DEFAULT false,
            pinned boolean NOT NULL DEFAULT false
        )
        """,
        """
        CREATE INDEX IF NOT EXISTS coordfs_versions_by_file ON coordfs_versions (file, id)
        """,
        GrantFunctions.within,
        """
        CREATE OR REPLACE FUNCTION coordfs_versions_lock(p_cluster text) RETURNS void
        LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(hashtext('coordfs versions ' || p_cluster)::bigint) $$
        """,
        // Live paths that are `p_from` or lie beneath it start with `p_to` instead.
        """
        CREATE OR REPLACE FUNCTION coordfs_version_move_paths(p_cluster text, p_from bytea, p_to bytea) RETURNS void
        LANGUAGE sql AS $$
            UPDATE coordfs_version_files SET path = p_to || substring(path FROM length(p_from) + 1)
            WHERE cluster = p_cluster AND NOT deleted
                AND (path = p_from OR (path >= p_from || '/'::bytea AND path < p_from || '0'::bytea))
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION coordfs_version_record(
            p_cluster text, p_path bytea, p_size bigint, p_modified bigint, p_kept bigint, p_kind text, p_pid int, p_uid bigint,
            p_process text, p_host text, p_mode bigint, p_deleting boolean)
        RETURNS TABLE (o_id bigint, o_file bigint, o_first boolean) LANGUAGE plpgsql AS $$
        DECLARE
            v_file bigint;
            v_id bigint;
            v_first boolean := false;
        BEGIN
            PERFORM coordfs_versions_lock(p_cluster);
            SELECT id INTO v_file FROM coordfs_version_files
                WHERE cluster = p_cluster AND path = p_path AND NOT deleted ORDER BY id DESC LIMIT 1;
            IF v_file IS NULL THEN
                INSERT INTO coordfs_version_files (cluster, path) VALUES (p_cluster, p_path) RETURNING id INTO v_file;
                v_first := true;
            END IF;
            INSERT INTO coordfs_versions (cluster, file, path, size, modified, kept, kind, pid, uid, process, host, mode)
                VALUES (p_cluster, v_file, p_path, p_size, p_modified, p_kept, p_kind, p_pid, p_uid, p_process, p_host, p_mode)
                RETURNING id INTO v_id;
            IF p_deleting THEN
                UPDATE coordfs_version_files SET deleted = true WHERE id = v_file;
            END IF;
            RETURN QUERY SELECT v_id, v_file, v_first;
        END
        $$
        """,
        // A rename (VersionIndexing.moved has the rule): files recorded beneath the destination
        // count as deleted; the live file it replaces too, when anything with versions moves.
        """
        CREATE OR REPLACE FUNCTION coordfs_version_moved(p_cluster text, p_from bytea, p_to bytea) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM coordfs_versions_lock(p_cluster);
            UPDATE coordfs_version_files SET deleted = true
            WHERE cluster = p_cluster AND NOT deleted AND path >= p_to || '/'::bytea AND path < p_to || '0'::bytea;
            IF EXISTS (SELECT 1 FROM coordfs_version_files WHERE cluster = p_cluster AND NOT deleted
                       AND (path = p_from OR (path >= p_from || '/'::bytea AND path < p_from || '0'::bytea))) THEN
                UPDATE coordfs_version_files SET deleted = true WHERE cluster = p_cluster AND path = p_to AND NOT deleted;
            END IF;
            PERFORM coordfs_version_move_paths(p_cluster, p_from, p_to);
        END
        $$
        """,
        // Two subtrees exchange places, through a prefix no path has (one NUL byte).
        """
        CREATE OR REPLACE FUNCTION coordfs_version_exchanged(p_cluster text, p_first bytea, p_second bytea) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM coordfs_versions_lock(p_cluster);
            PERFORM coordfs_version_move_paths(p_cluster, p_first, '\\x00'::bytea);
            PERFORM coordfs_version_move_paths(p_cluster, p_second, p_first);
            PERFORM coordfs_version_move_paths(p_cluster, '\\x00'::bytea, p_second);
        END
        $$
        """,
        """
        CREATE OR REPLACE FUNCTION coordfs_version_deleted(p_cluster text, p_path bytea) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM coordfs_versions_lock(p_cluster);
            UPDATE coordfs_version_files SET deleted = true
            WHERE cluster = p_cluster AND NOT deleted
                AND (path = p_path OR (path >= p_path || '/'::bytea AND path < p_path || '0'::bytea));
        END
        $$
        """,
    ]
}
