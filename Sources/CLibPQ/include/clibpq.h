// libpq, loaded at run time. Only `coordfs mount --cluster` needs PostgreSQL, so the binary does
// not link libpq (and the dozen libraries it pulls in): every other command, `coordfs exec`
// above all, starts without them. The declarations mirror libpq-fe.h's public ABI with plain
// types, so building needs no PostgreSQL headers either.
#ifndef CLIBPQ_H
#define CLIBPQ_H

#include <stddef.h>

typedef struct pg_conn cpq_conn;
typedef struct pg_result cpq_result;

/// libpq's PGnotify (its layout is part of libpq's stable ABI).
typedef struct cpq_notify {
    char *relname;
    int be_pid;
    char *extra;
    struct cpq_notify *next;
} cpq_notify;

enum {
    CPQ_CONNECTION_OK = 0,
    CPQ_PGRES_EMPTY_QUERY = 0,
    CPQ_PGRES_COMMAND_OK = 1,
    CPQ_PGRES_TUPLES_OK = 2,
    CPQ_PG_DIAG_SQLSTATE = 'C',
};

/// Loads libpq.so.5 once; 0 on success, else -1 with the loader's message in `error`.
int cpq_load(char *error, size_t size);

cpq_conn *cpq_connectdb_params(const char *const *keywords, const char *const *values, int expand_dbname);
int cpq_status(const cpq_conn *conn);
const char *cpq_error_message(const cpq_conn *conn);
void cpq_finish(cpq_conn *conn);
int cpq_socket(const cpq_conn *conn);
int cpq_backend_pid(const cpq_conn *conn);
cpq_result *cpq_exec_params(cpq_conn *conn, const char *command, int count, const char *const *values,
                            const int *lengths, const int *formats);
int cpq_result_status(const cpq_result *result);
const char *cpq_result_error_message(const cpq_result *result);
const char *cpq_result_error_field(const cpq_result *result, int field);
int cpq_ntuples(const cpq_result *result);
int cpq_nfields(const cpq_result *result);
const char *cpq_getvalue(const cpq_result *result, int row, int column);
int cpq_getlength(const cpq_result *result, int row, int column);
int cpq_getisnull(const cpq_result *result, int row, int column);
const char *cpq_cmd_tuples(cpq_result *result);
void cpq_clear(cpq_result *result);
int cpq_consume_input(cpq_conn *conn);
cpq_notify *cpq_notifies(cpq_conn *conn);
void cpq_freemem(void *pointer);

#endif
