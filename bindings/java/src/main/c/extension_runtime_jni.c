/* extension_runtime_jni.c: the JNI half of the Java runtime for extensiond extensions
 * (org.extensiond.runtime, bindings/java), over libExtensionRuntimeC (include/extension_runtime.h).
 *
 * Every native method belongs to the package-private class org.extensiond.runtime.Native; the
 * public classes (ExtensionRuntime, Request, ...) check arguments and turn the negative errno
 * results into exceptions. Strings cross as byte arrays of UTF-8 (never JNI's modified UTF-8):
 * Java encodes and decodes them.
 *
 * Threads. The C runtime calls back on threads of its own, which end when the callback returns.
 * A callback attaches its thread to the JVM as a daemon thread (named "extension-runtime") the
 * first time it needs to, and the thread is detached when it ends (a pthread key's destructor;
 * HotSpot restores its own thread pointer for exactly this use). A thread that was attached
 * already (a Java thread) is left as it was. Java objects handed to the C runtime as a callback's
 * context are global references: an activity's is deleted by its cleanup, an open-URL callback's
 * after its one call, a hint handler's is kept for the life of the process (the C runtime keeps
 * the handler that long), and the request and refresh handlers live in static fields of Native.
 * An exception a Java callback lets escape is printed (ExceptionDescribe) and cleared: it never
 * ends a runtime thread.
 *
 * Request channels. read and write work on the request's stream socket; writes use send(2) with
 * MSG_NOSIGNAL, so a write after the host closed its end throws IOException ("Broken pipe")
 * rather than raising SIGPIPE. Closing is Java's business (Request counts the calls in flight,
 * shuts the socket down to wake them and closes the descriptor after the last).
 */
#define _GNU_SOURCE
#include <extension_runtime.h>
#include <jni.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NATIVE_CLASS "org/extensiond/runtime/Native"
#define IO_CHUNK 65536

static JavaVM *vm;
static jclass native_class;  /* a global reference */
static jmethodID on_request_method, on_activity_method, on_refresh_method, on_hint_method, on_opened_method;
static pthread_key_t attached_key;

/* --- threads ------------------------------------------------------------------------------ */

static void detach_at_exit(void *value) {
    JavaVM *machine = value;
    if (machine) (*machine)->DetachCurrentThread(machine);
}

/* The JNIEnv of the calling thread, attaching it as a daemon thread when it is not attached;
 * NULL when it cannot be attached (the failure is printed). */
static JNIEnv *callback_env(void) {
    JNIEnv *env = NULL;
    jint got = (*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8);
    if (got == JNI_OK) return env;
    if (got != JNI_EDETACHED) {
        fprintf(stderr, "extension_runtime_jni: GetEnv failed (%d)\n", (int)got);
        return NULL;
    }
    JavaVMAttachArgs arguments = {.version = JNI_VERSION_1_8, .name = "extension-runtime", .group = NULL};
    if ((*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&env, &arguments) != JNI_OK) {
        fprintf(stderr, "extension_runtime_jni: cannot attach a runtime thread to the JVM\n");
        return NULL;
    }
    /* Detached when the thread ends (the key's destructor). */
    if (pthread_setspecific(attached_key, vm) != 0)
        fprintf(stderr, "extension_runtime_jni: cannot arrange to detach a runtime thread\n");
    return env;
}

/* Prints and clears an exception a callback let escape. */
static void settle(JNIEnv *env) {
    if ((*env)->ExceptionCheck(env)) {
        (*env)->ExceptionDescribe(env);
        (*env)->ExceptionClear(env);
    }
}

/* --- loading ------------------------------------------------------------------------------ */

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *machine, void *reserved) {
    (void)reserved;
    vm = machine;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    if (pthread_key_create(&attached_key, detach_at_exit) != 0) return JNI_ERR;
    jclass local = (*env)->FindClass(env, NATIVE_CLASS);
    if (!local) return JNI_ERR;
    native_class = (*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    if (!native_class) return JNI_ERR;
    on_request_method = (*env)->GetStaticMethodID(env, native_class, "onRequest", "(JI)V");
    on_activity_method = (*env)->GetStaticMethodID(env, native_class, "onActivity", "(Ljava/lang/Object;Z)V");
    on_refresh_method = (*env)->GetStaticMethodID(env, native_class, "onRefresh", "(J)V");
    on_hint_method = (*env)->GetStaticMethodID(env, native_class, "onHint", "(Ljava/lang/Object;[B)V");
    on_opened_method = (*env)->GetStaticMethodID(env, native_class, "onOpened", "(Ljava/lang/Object;Z)V");
    if (!on_request_method || !on_activity_method || !on_refresh_method || !on_hint_method || !on_opened_method) return JNI_ERR;
    /* The C runtime reads $EXTENSIOND_CHANNEL_FD on its first call and removes it from the C
     * environment: make that first call now, before Java code could start a child. */
    (void)ext_runtime_is_supervised();
    return JNI_VERSION_1_8;
}

/* --- helpers ------------------------------------------------------------------------------ */

/* A malloc'ed, NUL-terminated copy of `bytes` (NULL stays NULL; *failed set when out of memory,
 * with OutOfMemoryError pending). */
static char *c_string(JNIEnv *env, jbyteArray bytes, bool *failed) {
    *failed = false;
    if (!bytes) return NULL;
    jsize length = (*env)->GetArrayLength(env, bytes);
    char *copy = malloc((size_t)length + 1);
    if (!copy) {
        *failed = true;
        jclass oom = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
        if (oom) (*env)->ThrowNew(env, oom, "extension_runtime_jni: malloc");
        return NULL;
    }
    (*env)->GetByteArrayRegion(env, bytes, 0, length, (jbyte *)copy);
    copy[length] = '\0';
    return copy;
}

static jbyteArray java_bytes(JNIEnv *env, const char *text) {
    if (!text) return NULL;
    jsize length = (jsize)strlen(text);
    jbyteArray array = (*env)->NewByteArray(env, length);
    if (array) (*env)->SetByteArrayRegion(env, array, 0, length, (const jbyte *)text);
    return array;
}

static void throw_io(JNIEnv *env, int code, const char *what) {
    char buffer[256];
    char message[320];
    snprintf(message, sizeof message, "%s: %s", what, strerror_r(code, buffer, sizeof buffer));
    jclass io = (*env)->FindClass(env, "java/io/IOException");
    if (io) (*env)->ThrowNew(env, io, message);
}

/* --- callbacks from the C runtime --------------------------------------------------------- */

static void request_callback(uint64_t request_id, int channel_fd, void *context) {
    (void)context;
    JNIEnv *env = callback_env();
    if (!env) {
        close(channel_fd);
        return;
    }
    (*env)->CallStaticVoidMethod(env, native_class, on_request_method, (jlong)request_id, (jint)channel_fd);
    settle(env);
}

static void activity_block(bool expired, void *context) {
    JNIEnv *env = callback_env();
    if (!env) return;
    (*env)->CallStaticVoidMethod(env, native_class, on_activity_method, (jobject)context, (jboolean)expired);
    settle(env);
}

static void activity_cleanup(void *context) {
    JNIEnv *env = callback_env();
    if (env) (*env)->DeleteGlobalRef(env, (jobject)context);
}

static void refresh_callback(uint64_t refresh_id, void *context) {
    (void)context;
    JNIEnv *env = callback_env();
    if (!env) return;
    (*env)->CallStaticVoidMethod(env, native_class, on_refresh_method, (jlong)refresh_id);
    settle(env);
}

static void hint_callback(const char *name, void *context) {
    JNIEnv *env = callback_env();
    if (!env) return;
    jbyteArray bytes = java_bytes(env, name);
    if (bytes) {
        (*env)->CallStaticVoidMethod(env, native_class, on_hint_method, (jobject)context, bytes);
        (*env)->DeleteLocalRef(env, bytes);
    }
    settle(env);
}

static void opened_callback(bool opened, void *context) {
    JNIEnv *env = callback_env();
    if (!env) return;
    (*env)->CallStaticVoidMethod(env, native_class, on_opened_method, (jobject)context, (jboolean)opened);
    settle(env);
    (*env)->DeleteGlobalRef(env, (jobject)context);  /* called exactly once */
}

/* --- native methods of org.extensiond.runtime.Native -------------------------------------- */

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_isSupervised(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return ext_runtime_is_supervised();
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_start(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return ext_runtime_start(request_callback, NULL);
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_performExpiringActivity(JNIEnv *env, jclass cls, jbyteArray reason,
                                                                                  jobject block) {
    (void)cls;
    bool failed;
    char *text = c_string(env, reason, &failed);
    if (failed) return -ENOMEM;
    jobject global = (*env)->NewGlobalRef(env, block);
    if (!global) {
        free(text);
        return -ENOMEM;
    }
    int result = ext_perform_expiring_activity_with_cleanup(text, activity_block, activity_cleanup, global);
    free(text);
    if (result != 0) (*env)->DeleteGlobalRef(env, global);  /* nothing will be called */
    return result;
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_registerRefresh(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return ext_runtime_on_refresh(refresh_callback, NULL);
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_refreshComplete(JNIEnv *env, jclass cls, jlong refresh_id, jint result) {
    (void)env, (void)cls;
    return ext_refresh_complete((uint64_t)refresh_id, result);
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_observe(JNIEnv *env, jclass cls, jbyteArray name, jobject handler) {
    (void)cls;
    bool failed;
    char *text = c_string(env, name, &failed);
    if (failed) return -ENOMEM;
    jobject global = (*env)->NewGlobalRef(env, handler);
    if (!global) {
        free(text);
        return -ENOMEM;
    }
    int result = ext_observe(text, hint_callback, global);
    free(text);
    if (result != 0) (*env)->DeleteGlobalRef(env, global);  /* kept for the life of the process otherwise */
    return result;
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_complete(JNIEnv *env, jclass cls, jlong request_id, jbyteArray payload) {
    (void)cls;
    jsize length = payload ? (*env)->GetArrayLength(env, payload) : 0;
    if (length > EXT_REQUEST_MAX_PAYLOAD) return -EMSGSIZE;
    char empty = 0;
    char *bytes = length > 0 ? malloc((size_t)length) : &empty;
    if (!bytes) return -ENOMEM;
    if (length > 0) (*env)->GetByteArrayRegion(env, payload, 0, length, (jbyte *)bytes);
    int result = ext_request_complete((uint64_t)request_id, bytes, (size_t)length);
    if (length > 0) free(bytes);
    return result;
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_cancel(JNIEnv *env, jclass cls, jlong request_id, jbyteArray reason) {
    (void)cls;
    bool failed;
    char *text = c_string(env, reason, &failed);
    if (failed) return -ENOMEM;
    int result = ext_request_cancel((uint64_t)request_id, text);
    free(text);
    return result;
}

JNIEXPORT jbyteArray JNICALL Java_org_extensiond_runtime_Native_containerPath(JNIEnv *env, jclass cls) {
    (void)cls;
    return java_bytes(env, ext_container_path());
}

JNIEXPORT jbyteArray JNICALL Java_org_extensiond_runtime_Native_sharedContainerPath(JNIEnv *env, jclass cls, jbyteArray group) {
    (void)cls;
    bool failed;
    char *text = c_string(env, group, &failed);
    if (failed) return NULL;
    jbyteArray path = java_bytes(env, ext_shared_container_path(text));
    free(text);
    return path;
}

JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_openURL(JNIEnv *env, jclass cls, jbyteArray url, jobject callback) {
    (void)cls;
    bool failed;
    char *text = c_string(env, url, &failed);
    if (failed) return -ENOMEM;
    jobject global = (*env)->NewGlobalRef(env, callback);
    if (!global) {
        free(text);
        return -ENOMEM;
    }
    int result = ext_open_url(text, opened_callback, global);
    free(text);
    if (result != 0) (*env)->DeleteGlobalRef(env, global);  /* the callback is never called */
    return result;
}

/* Reads at most `length` bytes into bytes[offset...]: the count, or -1 at the end of the
 * stream; throws IOException on an error. */
JNIEXPORT jint JNICALL Java_org_extensiond_runtime_Native_read(JNIEnv *env, jclass cls, jint fd, jbyteArray bytes, jint offset,
                                                               jint length) {
    (void)cls;
    if (length <= 0) return 0;
    size_t want = length < IO_CHUNK ? (size_t)length : IO_CHUNK;
    char *buffer = malloc(want);
    if (!buffer) {
        throw_io(env, ENOMEM, "read");
        return -1;
    }
    ssize_t n;
    do n = read(fd, buffer, want);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        int code = errno;
        free(buffer);
        throw_io(env, code, "read");
        return -1;
    }
    if (n > 0) (*env)->SetByteArrayRegion(env, bytes, offset, (jsize)n, (const jbyte *)buffer);
    free(buffer);
    return n == 0 ? -1 : (jint)n;
}

/* Writes all of bytes[offset..<offset+length]; throws IOException on an error. */
JNIEXPORT void JNICALL Java_org_extensiond_runtime_Native_write(JNIEnv *env, jclass cls, jint fd, jbyteArray bytes, jint offset,
                                                                jint length) {
    (void)cls;
    if (length <= 0) return;
    size_t chunk = length < IO_CHUNK ? (size_t)length : IO_CHUNK;
    char *buffer = malloc(chunk);
    if (!buffer) {
        throw_io(env, ENOMEM, "write");
        return;
    }
    bool socket = true;
    jint done = 0;
    while (done < length) {
        size_t part = (size_t)(length - done) < chunk ? (size_t)(length - done) : chunk;
        (*env)->GetByteArrayRegion(env, bytes, offset + done, (jsize)part, (jbyte *)buffer);
        size_t sent = 0;
        while (sent < part) {
            ssize_t n = socket ? send(fd, buffer + sent, part - sent, MSG_NOSIGNAL) : write(fd, buffer + sent, part - sent);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == ENOTSOCK && socket) {
                socket = false;
                continue;
            }
            if (n < 0) {
                int code = errno;
                free(buffer);
                throw_io(env, code, "write");
                return;
            }
            sent += (size_t)n;
        }
        done += (jint)part;
    }
    free(buffer);
}

JNIEXPORT void JNICALL Java_org_extensiond_runtime_Native_shutdown(JNIEnv *env, jclass cls, jint fd) {
    (void)env, (void)cls;
    shutdown(fd, SHUT_RDWR);
}

JNIEXPORT void JNICALL Java_org_extensiond_runtime_Native_close(JNIEnv *env, jclass cls, jint fd) {
    (void)env, (void)cls;
    close(fd);
}
