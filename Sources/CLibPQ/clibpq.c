#include "clibpq.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// One pointer per libpq function used, filled once by cpq_load.
static struct {
    cpq_conn *(*connectdb_params)(const char *const *, const char *const *, int);
    int (*status)(const cpq_conn *);
    char *(*error_message)(const cpq_conn *);
    void (*finish)(cpq_conn *);
    int (*socket)(const cpq_conn *);
    int (*backend_pid)(const cpq_conn *);
    cpq_result *(*exec_params)(cpq_conn *, const char *, int, const unsigned int *, const char *const *,
                               const int *, const int *, int);
    int (*result_status)(const cpq_result *);
    char *(*result_error_message)(const cpq_result *);
    char *(*result_error_field)(const cpq_result *, int);
    int (*ntuples)(const cpq_result *);
    int (*nfields)(const cpq_result *);
    char *(*getvalue)(const cpq_result *, int, int);
    int (*getlength)(const cpq_result *, int, int);
    int (*getisnull)(const cpq_result *, int, int);
    char *(*cmd_tuples)(cpq_result *);
    void (*clear)(cpq_result *);
    int (*consume_input)(cpq_conn *);
    cpq_notify *(*notifies)(cpq_conn *);
    void (*freemem)(void *);
} pq;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void *resolve(void *library, const char *name) {
    void *symbol = dlsym(library, name);
    if (symbol == NULL && load_error[0] == 0) {
        snprintf(load_error, sizeof load_error, "libpq has no %s", name);
    }
    return symbol;
}

static void load(void) {
    void *library = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *message = dlerror();
        snprintf(load_error, sizeof load_error, "%s", message ? message : "libpq.so.5 not found");
        return;
    }
    pq.connectdb_params = resolve(library, "PQconnectdbParams");
    pq.status = resolve(library, "PQstatus");
    pq.error_message = resolve(library, "PQerrorMessage");
    pq.finish = resolve(library, "PQfinish");
    pq.socket = resolve(library, "PQsocket");
    pq.backend_pid = resolve(library, "PQbackendPID");
    pq.exec_params = resolve(library, "PQexecParams");
    pq.result_status = resolve(library, "PQresultStatus");
    pq.result_error_message = resolve(library, "PQresultErrorMessage");
    pq.result_error_field = resolve(library, "PQresultErrorField");
    pq.ntuples = resolve(library, "PQntuples");
    pq.nfields = resolve(library, "PQnfields");
    pq.getvalue = resolve(library, "PQgetvalue");
    pq.getlength = resolve(library, "PQgetlength");
    pq.getisnull = resolve(library, "PQgetisnull");
    pq.cmd_tuples = resolve(library, "PQcmdTuples");
    pq.clear = resolve(library, "PQclear");
    pq.consume_input = resolve(library, "PQconsumeInput");
    pq.notifies = resolve(library, "PQnotifies");
    pq.freemem = resolve(library, "PQfreemem");
}

int cpq_load(char *error, size_t size) {
    pthread_once(&load_once, load);
    if (load_error[0] != 0) {
        snprintf(error, size, "%s", load_error);
        return -1;
    }
    return 0;
}

cpq_conn *cpq_connectdb_params(const char *const *keywords, const char *const *values, int expand_dbname) {
    return pq.connectdb_params(keywords, values, expand_dbname);
}
int cpq_status(const cpq_conn *conn) { return pq.status(conn); }
const char *cpq_error_message(const cpq_conn *conn) { return pq.error_message(conn); }
void cpq_finish(cpq_conn *conn) { pq.finish(conn); }
int cpq_socket(const cpq_conn *conn) { return pq.socket(conn); }
int cpq_backend_pid(const cpq_conn *conn) { return pq.backend_pid(conn); }
cpq_result *cpq_exec_params(cpq_conn *conn, const char *command, int count, const char *const *values,
                            const int *lengths, const int *formats) {
    // Parameter types are left to the server (NULL), results come as text (0).
    return pq.exec_params(conn, command, count, NULL, values, lengths, formats, 0);
}
int cpq_result_status(const cpq_result *result) { return pq.result_status(result); }
const char *cpq_result_error_message(const cpq_result *result) { return pq.result_error_message(result); }
const char *cpq_result_error_field(const cpq_result *result, int field) { return pq.result_error_field(result, field); }
int cpq_ntuples(const cpq_result *result) { return pq.ntuples(result); }
int cpq_nfields(const cpq_result *result) { return pq.nfields(result); }
const char *cpq_getvalue(const cpq_result *result, int row, int column) { return pq.getvalue(result, row, column); }
int cpq_getlength(const cpq_result *result, int row, int column) { return pq.getlength(result, row, column); }
int cpq_getisnull(const cpq_result *result, int row, int column) { return pq.getisnull(result, row, column); }
const char *cpq_cmd_tuples(cpq_result *result) { return pq.cmd_tuples(result); }
void cpq_clear(cpq_result *result) { pq.clear(result); }
int cpq_consume_input(cpq_conn *conn) { return pq.consume_input(conn); }
cpq_notify *cpq_notifies(cpq_conn *conn) { return pq.notifies(conn); }
void cpq_freemem(void *pointer) { pq.freemem(pointer); }
