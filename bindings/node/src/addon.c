/* extension_runtime.node: the Node-API addon under bindings/node/index.js, a thin layer over
 * libExtensionRuntimeC (include/extension_runtime.h). Built by scripts/build-node-runtime.sh.
 *
 * Every function here returns the C interface's result (0 or a negative errno) and leaves the
 * checking of arguments, errors and promises to index.js: the addon only moves values between
 * JavaScript and C, and calls back from the C runtime's threads into JavaScript.
 *
 * Threads. The C runtime calls every callback on a runtime thread of its own. JavaScript runs
 * only on the main thread: each callback reaches it through a napi_threadsafe_function (TSFN),
 * whose call_js function runs on the main thread's event loop. Nothing here calls JavaScript
 * from another thread.
 *
 * Keeping the process alive. A TSFN that is "referenced" keeps the event loop (and so the
 * process) alive; an unreferenced one does not. The rule is: alive while something is pending.
 *  - start(): its TSFN stays referenced for the life of the process: a started extension
 *    waits for requests until extensiond ends it, as a listening server does. A request's
 *    channel (a net.Socket in index.js) keeps the loop alive while it is open.
 *  - performExpiringActivity(): one TSFN per activity, referenced from the call until the C
 *    runtime's cleanup (every call of the block returned and the assertion released), then
 *    released: an open assertion keeps the process alive, a finished one does not.
 *  - openURL(): one TSFN per call, referenced until the answer is delivered, then released.
 *  - observe() and onRefresh(): their TSFNs are unreferenced (napi_unref_threadsafe_function):
 *    a handler waiting for a hint or a refresh does not keep the process alive by itself.
 *
 * Blocking. An activity's block must hold the assertion until the JavaScript block is over,
 * which may be after a promise settles: the runtime thread that calls the C block waits on a
 * condition variable until index.js calls the `done` function passed with the call. The main
 * thread never waits for a runtime thread.
 *
 * Shutdown. When the environment ends (the 'exit' event, or the environment's cleanup), the
 * `closing` flag is set under `gate`; from then on no runtime thread touches a TSFN (they may
 * be freed): a request's descriptor is closed, an activity's call returns at once, a hint is
 * dropped. A call queued but never run is handed to call_js with a NULL env, which releases
 * what it holds (an activity's waiting thread included).
 */
#define _GNU_SOURCE
#include <node_api.h>

#include <extension_runtime.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- plumbing ----------------------------------------------------------------------------- */

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static bool closing;
static pthread_t main_thread;

/* Queues `data` for `tsfn`'s call_js; false when the environment is closing (nothing queued). */
static bool post(napi_threadsafe_function tsfn, void *data) {
    pthread_mutex_lock(&gate);
    bool posted = !closing && napi_call_threadsafe_function(tsfn, data, napi_tsfn_nonblocking) == napi_ok;
    pthread_mutex_unlock(&gate);
    return posted;
}

/* Releases `tsfn` from a runtime thread (unless the environment is closing: it may be gone). */
static void release(napi_threadsafe_function tsfn) {
    pthread_mutex_lock(&gate);
    if (!closing) napi_release_threadsafe_function(tsfn, napi_tsfn_release);
    pthread_mutex_unlock(&gate);
}

/* Calls `fn` with `argc` arguments; an exception it throws becomes an uncaught exception (the
 * 'uncaughtException' event; by default, Node prints it and exits), as a throw from any other
 * event callback would, instead of being dropped with a warning. */
static void call(napi_env env, napi_value fn, size_t argc, const napi_value *argv) {
    napi_value undefined, result;
    napi_get_undefined(env, &undefined);
    if (napi_call_function(env, undefined, fn, argc, argv, &result) == napi_pending_exception) {
        napi_value error;
        if (napi_get_and_clear_last_exception(env, &error) == napi_ok) napi_fatal_exception(env, error);
    }
}

/* Throws a TypeError and returns NULL (a napi_value for the caller to return). */
static napi_value type_error(napi_env env, const char *message) {
    napi_throw_type_error(env, NULL, message);
    return NULL;
}

static napi_value number(napi_env env, int64_t value) {
    napi_value v;
    napi_create_int64(env, value, &v);
    return v;
}

/* The string value `value` as a malloc'ed UTF-8 copy (to free), or NULL with a TypeError thrown
 * (or on allocation failure, with an Error thrown). */
static char *utf8(napi_env env, napi_value value, const char *what) {
    size_t length;
    if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) {
        type_error(env, what);
        return NULL;
    }
    char *text = malloc(length + 1);
    if (!text) {
        napi_throw_error(env, "ENOMEM", "out of memory");
        return NULL;
    }
    napi_get_value_string_utf8(env, value, text, length + 1, &length);
    return text;
}

/* A request or refresh id: a bigint (0...2^64-1, lossless) or a non-negative safe integer. */
static bool get_id(napi_env env, napi_value value, uint64_t *id) {
    napi_valuetype type;
    napi_typeof(env, value, &type);
    if (type == napi_bigint) {
        bool lossless;
        return napi_get_value_bigint_uint64(env, value, id, &lossless) == napi_ok && lossless;
    }
    double d;
    if (type != napi_number || napi_get_value_double(env, value, &d) != napi_ok) return false;
    if (!(d >= 0 && d <= 9007199254740991.0) || d != (double)(uint64_t)d) return false;
    *id = (uint64_t)d;
    return true;
}

static napi_value string_or_null(napi_env env, const char *text) {
    napi_value v;
    if (text) napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &v);
    else napi_get_null(env, &v);
    return v;
}

/* Arguments of the current call: exactly `count` expected (missing ones are undefined). */
static bool arguments(napi_env env, napi_callback_info info, size_t count, napi_value *argv) {
    size_t argc = count;
    return napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok;
}

/* A TSFN calling JavaScript function `fn` through `call_js`, referenced (it keeps the loop
 * alive) unless unreferenced by the caller. `context` is given to `finalize`, when the TSFN is
 * finalized (after its last release). */
static napi_status make_tsfn(napi_env env, napi_value fn, const char *name, void *context, napi_finalize finalize,
                             napi_threadsafe_function_call_js call_js, napi_threadsafe_function *out) {
    napi_value resource_name;
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource_name);
    return napi_create_threadsafe_function(env, fn, NULL, resource_name, 0, 1, context, finalize, context, call_js, out);
}

static void free_context(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    free(data);
}

/* --- requests ----------------------------------------------------------------------------- */

struct box {
    napi_threadsafe_function tsfn;
};

struct request_item {
    uint64_t id;
    int fd;
};

static void on_request(uint64_t id, int fd, void *context) {
    struct box *box = context;
    struct request_item *item = malloc(sizeof *item);
    if (item) {
        item->id = id;
        item->fd = fd;
        if (post(box->tsfn, item)) return;
        free(item);
    }
    close(fd); /* the environment is ending: the host sees its channel close */
}

static void call_request(napi_env env, napi_value fn, void *context, void *data) {
    (void)context;
    struct request_item *item = data;
    if (!env) {
        close(item->fd);
        free(item);
        return;
    }
    napi_value argv[2];
    napi_create_bigint_uint64(env, item->id, &argv[0]);
    napi_create_int32(env, item->fd, &argv[1]);
    free(item);
    call(env, fn, 2, argv);
}

/* start(onRequest(id: bigint, fd: number)) -> 0 | -errno. The TSFN stays referenced. */
static napi_value js_start(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!arguments(env, info, 1, argv)) return NULL;
    struct box *box = calloc(1, sizeof *box);
    if (!box) return number(env, -ENOMEM);
    if (make_tsfn(env, argv[0], "extension-runtime request", NULL, NULL, call_request, &box->tsfn) != napi_ok) {
        free(box);
        return type_error(env, "start: onRequest must be a function");
    }
    int rc = ext_runtime_start(on_request, box);
    if (rc != 0) {
        napi_release_threadsafe_function(box->tsfn, napi_tsfn_abort);
        free(box);
    }
    return number(env, rc); /* on success `box` lives for the life of the process */
}

/* completeRequest(id, bytes: Uint8Array) -> 0 | -errno */
static napi_value js_complete_request(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!arguments(env, info, 2, argv)) return NULL;
    uint64_t id;
    if (!get_id(env, argv[0], &id)) return type_error(env, "completeRequest: bad request id");
    bool is_array;
    napi_is_typedarray(env, argv[1], &is_array);
    if (!is_array) return type_error(env, "completeRequest: the payload must be a Uint8Array");
    napi_typedarray_type type;
    size_t length;
    void *bytes;
    napi_get_typedarray_info(env, argv[1], &type, &length, &bytes, NULL, NULL);
    if (type != napi_uint8_array) return type_error(env, "completeRequest: the payload must be a Uint8Array");
    static const char none = 0;
    return number(env, ext_request_complete(id, length ? bytes : &none, length));
}

/* cancelRequest(id, reason: string) -> 0 | -errno */
static napi_value js_cancel_request(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!arguments(env, info, 2, argv)) return NULL;
    uint64_t id;
    if (!get_id(env, argv[0], &id)) return type_error(env, "cancelRequest: bad request id");
    char *reason = utf8(env, argv[1], "cancelRequest: the reason must be a string");
    if (!reason) return NULL;
    int rc = ext_request_cancel(id, reason);
    free(reason);
    return number(env, rc);
}

/* --- expiring activities ------------------------------------------------------------------ */

struct activity {
    napi_threadsafe_function tsfn;
};

/* One call of an activity's block, on the stack of the runtime thread that waits for it. */
struct activity_call {
    bool expired;
    bool done;
    bool detached; /* on the heap, not waited for: freed when finished */
    pthread_mutex_t lock;
    pthread_cond_t finished;
};

/* The data of one `done` function given to JavaScript: the call it ends, NULL once ended. It
 * is freed with the function (a finalizer), so a late or repeated done() is harmless. */
struct done_token {
    struct activity_call *call;
};

static void finish(struct activity_call *c) {
    if (c->detached) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->finished);
        free(c);
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->done = true;
    pthread_cond_signal(&c->finished);
    pthread_mutex_unlock(&c->lock);
}

static void end_token(struct done_token *token) {
    struct activity_call *c = token->call;
    token->call = NULL;
    if (c) finish(c);
}

static napi_value js_done(napi_env env, napi_callback_info info) {
    void *data;
    size_t argc = 0;
    if (napi_get_cb_info(env, info, &argc, NULL, NULL, &data) == napi_ok) end_token(data);
    return NULL;
}

static void call_activity(napi_env env, napi_value fn, void *context, void *data) {
    (void)context;
    struct activity_call *c = data;
    if (!env) {
        finish(c);
        return;
    }
    struct done_token *token = malloc(sizeof *token);
    napi_value argv[2];
    if (!token || napi_create_function(env, "done", NAPI_AUTO_LENGTH, js_done, token, &argv[1]) != napi_ok) {
        free(token);
        finish(c);
        return;
    }
    token->call = c;
    /* Freed with the function; if the finalizer cannot be added, a few bytes are leaked. */
    (void)napi_add_finalizer(env, argv[1], token, free_context, NULL, NULL);
    napi_get_boolean(env, c->expired, &argv[0]);
    napi_value undefined, result;
    napi_get_undefined(env, &undefined);
    if (napi_call_function(env, undefined, fn, 2, argv, &result) == napi_pending_exception) {
        end_token(token); /* the block is over: the assertion must not be held by an exception */
        napi_value error;
        if (napi_get_and_clear_last_exception(env, &error) == napi_ok) napi_fatal_exception(env, error);
    }
}

/* The C block: hands the call to JavaScript and waits until its `done` is called. */
static void activity_block(bool expired, void *context) {
    struct activity *a = context;
    if (pthread_equal(pthread_self(), main_thread)) {
        /* The runtime could create no thread and calls the block on the caller's (the main
         * thread, inside performExpiringActivity): JavaScript cannot run until this returns,
         * so the call is queued detached and not waited for (only a denial comes this way). */
        struct activity_call *d = calloc(1, sizeof *d);
        if (!d) return;
        d->expired = expired;
        d->detached = true;
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->finished, NULL);
        if (!post(a->tsfn, d)) finish(d);
        return;
    }
    struct activity_call c = {.expired = expired};
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.finished, NULL);
    if (post(a->tsfn, &c)) {
        pthread_mutex_lock(&c.lock);
        while (!c.done) pthread_cond_wait(&c.finished, &c.lock);
        pthread_mutex_unlock(&c.lock);
    }
    pthread_mutex_destroy(&c.lock);
    pthread_cond_destroy(&c.finished);
}

static void activity_cleanup(void *context) {
    struct activity *a = context;
    release(a->tsfn); /* finalized on the main thread, which frees `a` */
}

/* performExpiringActivity(reason: string, block(expired: boolean, done: () => void)) -> 0 | -errno.
 * The TSFN is referenced until the runtime's cleanup. */
static napi_value js_perform_expiring_activity(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!arguments(env, info, 2, argv)) return NULL;
    char *reason = utf8(env, argv[0], "performExpiringActivity: the reason must be a string");
    if (!reason) return NULL;
    struct activity *a = calloc(1, sizeof *a);
    if (!a) {
        free(reason);
        return number(env, -ENOMEM);
    }
    if (make_tsfn(env, argv[1], "extension-runtime activity", a, free_context, call_activity, &a->tsfn) != napi_ok) {
        free(reason);
        free(a);
        return type_error(env, "performExpiringActivity: the block must be a function");
    }
    napi_threadsafe_function tsfn = a->tsfn;
    int rc = ext_perform_expiring_activity_with_cleanup(reason, activity_block, activity_cleanup, a);
    free(reason);
    if (rc != 0) napi_release_threadsafe_function(tsfn, napi_tsfn_abort); /* nothing will be called; frees `a` */
    return number(env, rc);
}

/* --- hints, refresh, open URL ------------------------------------------------------------- */

static void on_hint(const char *name, void *context) {
    struct box *box = context;
    char *copy = strdup(name);
    if (copy && !post(box->tsfn, copy)) free(copy);
}

static void call_hint(napi_env env, napi_value fn, void *context, void *data) {
    (void)context;
    if (env) {
        napi_value name;
        napi_create_string_utf8(env, data, NAPI_AUTO_LENGTH, &name);
        call(env, fn, 1, &name);
    }
    free(data);
}

/* observe(name: string, handler(name: string)) -> 0 | -errno. Unreferenced; kept for the life
 * of the process once observed. */
static napi_value js_observe(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!arguments(env, info, 2, argv)) return NULL;
    char *name = utf8(env, argv[0], "observe: the name must be a string");
    if (!name) return NULL;
    struct box *box = calloc(1, sizeof *box);
    if (!box) {
        free(name);
        return number(env, -ENOMEM);
    }
    if (make_tsfn(env, argv[1], "extension-runtime hint", NULL, NULL, call_hint, &box->tsfn) != napi_ok) {
        free(name);
        free(box);
        return type_error(env, "observe: the handler must be a function");
    }
    napi_unref_threadsafe_function(env, box->tsfn);
    int rc = ext_observe(name, on_hint, box);
    free(name);
    if (rc != 0) {
        napi_release_threadsafe_function(box->tsfn, napi_tsfn_abort);
        free(box);
    }
    return number(env, rc);
}

static void on_refresh(uint64_t id, void *context) {
    struct box *box = context;
    uint64_t *item = malloc(sizeof *item);
    if (!item) return;
    *item = id;
    if (!post(box->tsfn, item)) free(item);
}

static void call_refresh(napi_env env, napi_value fn, void *context, void *data) {
    (void)context;
    if (env) {
        napi_value id;
        napi_create_bigint_uint64(env, *(uint64_t *)data, &id);
        call(env, fn, 1, &id);
    }
    free(data);
}

/* onRefresh(handler(id: bigint)) -> 0 | -errno. Unreferenced. */
static napi_value js_on_refresh(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!arguments(env, info, 1, argv)) return NULL;
    struct box *box = calloc(1, sizeof *box);
    if (!box) return number(env, -ENOMEM);
    if (make_tsfn(env, argv[0], "extension-runtime refresh", NULL, NULL, call_refresh, &box->tsfn) != napi_ok) {
        free(box);
        return type_error(env, "onRefresh: the handler must be a function");
    }
    napi_unref_threadsafe_function(env, box->tsfn);
    int rc = ext_runtime_on_refresh(on_refresh, box);
    if (rc != 0) {
        napi_release_threadsafe_function(box->tsfn, napi_tsfn_abort);
        free(box);
    }
    return number(env, rc);
}

/* refreshComplete(id, result: number) -> 0 | -errno */
static napi_value js_refresh_complete(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!arguments(env, info, 2, argv)) return NULL;
    uint64_t id;
    if (!get_id(env, argv[0], &id)) return type_error(env, "refreshComplete: bad refresh id");
    int32_t result;
    if (napi_get_value_int32(env, argv[1], &result) != napi_ok) return type_error(env, "refreshComplete: the result must be a number");
    return number(env, ext_refresh_complete(id, result));
}

struct opened_item {
    napi_threadsafe_function tsfn;
    bool opened;
};

static void on_opened(bool opened, void *context) {
    struct opened_item *item = context;
    item->opened = opened;
    napi_threadsafe_function tsfn = item->tsfn;
    if (!post(tsfn, item)) free(item);
    release(tsfn); /* the one answer is queued: nothing more will come */
}

static void call_opened(napi_env env, napi_value fn, void *context, void *data) {
    (void)context;
    struct opened_item *item = data;
    if (env) {
        napi_value opened;
        napi_get_boolean(env, item->opened, &opened);
        call(env, fn, 1, &opened);
    }
    free(item);
}

/* openURL(url: string, callback(opened: boolean)) -> 0 | -errno. Referenced until answered. */
static napi_value js_open_url(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (!arguments(env, info, 2, argv)) return NULL;
    char *url = utf8(env, argv[0], "openURL: the URL must be a string");
    if (!url) return NULL;
    struct opened_item *item = calloc(1, sizeof *item);
    if (!item) {
        free(url);
        return number(env, -ENOMEM);
    }
    if (make_tsfn(env, argv[1], "extension-runtime open URL", NULL, NULL, call_opened, &item->tsfn) != napi_ok) {
        free(url);
        free(item);
        return type_error(env, "openURL: the callback must be a function");
    }
    napi_threadsafe_function tsfn = item->tsfn;
    int rc = ext_open_url(url, on_opened, item);
    free(url);
    if (rc != 0) {
        napi_release_threadsafe_function(tsfn, napi_tsfn_abort);
        free(item);
    }
    return number(env, rc);
}

/* --- plain calls -------------------------------------------------------------------------- */

static napi_value js_is_supervised(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value v;
    napi_get_boolean(env, ext_runtime_is_supervised() == 1, &v);
    return v;
}

static napi_value js_container_path(napi_env env, napi_callback_info info) {
    (void)info;
    return string_or_null(env, ext_container_path());
}

static napi_value js_shared_container_path(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (!arguments(env, info, 1, argv)) return NULL;
    char *group = utf8(env, argv[0], "sharedContainerPath: the group must be a string");
    if (!group) return NULL;
    napi_value v = string_or_null(env, ext_shared_container_path(group));
    free(group);
    return v;
}

/* close(): the environment is ending (index.js calls it from the 'exit' event). */
static void close_gate(void) {
    pthread_mutex_lock(&gate);
    closing = true;
    pthread_mutex_unlock(&gate);
}

static napi_value js_close(napi_env env, napi_callback_info info) {
    (void)env;
    (void)info;
    close_gate();
    return NULL;
}

static void cleanup_hook(void *arg) {
    (void)arg;
    close_gate();
}

/* --- the module --------------------------------------------------------------------------- */

static void property(napi_env env, napi_value exports, const char *name, napi_value value) {
    napi_set_named_property(env, exports, name, value);
}

static void function(napi_env env, napi_value exports, const char *name, napi_callback cb) {
    napi_value fn;
    napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn);
    property(env, exports, name, fn);
}

NAPI_MODULE_INIT() {
    main_thread = pthread_self();
    napi_add_env_cleanup_hook(env, cleanup_hook, NULL);
    function(env, exports, "start", js_start);
    function(env, exports, "completeRequest", js_complete_request);
    function(env, exports, "cancelRequest", js_cancel_request);
    function(env, exports, "performExpiringActivity", js_perform_expiring_activity);
    function(env, exports, "observe", js_observe);
    function(env, exports, "onRefresh", js_on_refresh);
    function(env, exports, "refreshComplete", js_refresh_complete);
    function(env, exports, "openURL", js_open_url);
    function(env, exports, "isSupervised", js_is_supervised);
    function(env, exports, "containerPath", js_container_path);
    function(env, exports, "sharedContainerPath", js_shared_container_path);
    function(env, exports, "close", js_close);
    property(env, exports, "REQUEST_MAX_PAYLOAD", number(env, EXT_REQUEST_MAX_PAYLOAD));
    property(env, exports, "ACTIVITY_MAX_REASON", number(env, EXT_ACTIVITY_MAX_REASON));
    property(env, exports, "OBSERVE_MAX_NAMES", number(env, EXT_OBSERVE_MAX_NAMES));
    property(env, exports, "URL_MAX", number(env, EXT_URL_MAX));
    property(env, exports, "REFRESH_NEW_DATA", number(env, EXT_REFRESH_NEW_DATA));
    property(env, exports, "REFRESH_NO_DATA", number(env, EXT_REFRESH_NO_DATA));
    property(env, exports, "REFRESH_FAILED", number(env, EXT_REFRESH_FAILED));
    return exports;
}
