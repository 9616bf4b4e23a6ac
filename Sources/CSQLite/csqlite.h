// The system's SQLite 3, for Sources/CoordFSVersions.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast Swift cannot import: bound values are copied by SQLite.
static inline sqlite3_destructor_type csqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
