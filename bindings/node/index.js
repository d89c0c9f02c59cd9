/**
 * extension-runtime: write extensiond extensions in Node.js.
 *
 * A thin layer over libExtensionRuntimeC (include/extension_runtime.h) through a Node-API addon
 * (extension_runtime.node, built by scripts/build-node-runtime.sh), with the semantics of the C
 * interface (docs/assertions.md) and the names of the Python package in JavaScript style
 * (docs/node.md):
 *
 *     const rt = require('extension-runtime');
 *
 *     rt.start({
 *       onRequest(request) {
 *         request.channel.on('data', (bytes) => request.channel.write(bytes));
 *         request.channel.on('end', () => request.channel.end());
 *       },
 *     });
 *
 *     rt.performExpiringActivity('save state', async (expired) => {
 *       if (expired) return abort.abort();   // the second call: stop quickly
 *       await save(abort.signal);            // the assertion is held until this settles
 *     });
 *
 * Every callback runs on the main thread, from the event loop: the C runtime's threads reach
 * JavaScript through thread-safe functions only. An exception thrown by a callback (or a
 * promise it returns that rejects) is an uncaught exception, as in any other event callback.
 *
 * Keeping the process alive: after start(), the process serves until extensiond ends it (like
 * a listening server). Otherwise the runtime keeps it alive only while something is pending:
 * an expiring activity until its block's calls are over, a request while its channel is open,
 * an openURL() until its answer. observe() and onRefresh() handlers alone do not.
 *
 * Loading the module reads (and removes) $EXTENSIOND_CHANNEL_FD from the environment
 * (process.env included), so that the programs the extension runs do not inherit it. Use it
 * from the main thread only (not from a worker_threads Worker): the runtime is one per process.
 */
'use strict';

const net = require('net');
const os = require('os');
const { isMainThread } = require('worker_threads');

if (!isMainThread) {
  throw new Error('extension-runtime: load it from the main thread (the runtime is one per process)');
}

/** The addon: the C interface, one function per call (src/addon.c). */
let native;
try {
  native = require('./extension_runtime.node');
} catch (error) {
  if (!/libExtensionRuntimeC/.test(String(error && error.message))) throw error;
  throw new Error(
    'extension-runtime: libExtensionRuntimeC.so.0 is neither in the package (scripts/build-node-runtime.sh copies it ' +
      `there unless --no-bundle) nor on the dynamic loader's path (install the C runtime): ${error.message}`,
  );
}

/** The largest result Request.complete accepts, in bytes (EXT_REQUEST_MAX_PAYLOAD). */
const REQUEST_MAX_PAYLOAD = native.REQUEST_MAX_PAYLOAD;
/** The longest reason an expiring activity accepts, in bytes of UTF-8 (EXT_ACTIVITY_MAX_REASON). */
const ACTIVITY_MAX_REASON = native.ACTIVITY_MAX_REASON;
/** The most distinct names one process may observe (EXT_OBSERVE_MAX_NAMES). */
const OBSERVE_MAX_NAMES = native.OBSERVE_MAX_NAMES;
/** The longest URL openURL accepts, in bytes of UTF-8 (EXT_URL_MAX). */
const URL_MAX = native.URL_MAX;

/**
 * The answer to a background refresh (EXT_REFRESH_*).
 * @readonly
 * @enum {number}
 */
const RefreshResult = Object.freeze({
  /** New content was fetched: hosts showing the extension are told to redraw. */
  NEW_DATA: native.REFRESH_NEW_DATA,
  /** Nothing changed. */
  NO_DATA: native.REFRESH_NO_DATA,
  /** The refresh failed: the next one is backed off. */
  FAILED: native.REFRESH_FAILED,
});

const errnoNames = new Map(Object.entries(os.constants.errno).map(([name, value]) => [value, name]));

/** A call into the runtime failed: `errno` is the error number the C interface returned, `code` its name. */
class ExtensionRuntimeError extends Error {
  /**
   * @param {number} errno a positive error number
   * @param {string} message
   */
  constructor(errno, message) {
    super(message);
    this.name = 'ExtensionRuntimeError';
    /** The error number (positive), e.g. os.constants.errno.EALREADY. */
    this.errno = errno;
    /** The error's name, e.g. 'EALREADY'. */
    this.code = errnoNames.get(errno) || `E${errno}`;
  }
}

/** The process was not launched by extensiond (or its channel to extensiond is closed): ENOTCONN. */
class NotSupervisedError extends ExtensionRuntimeError {
  /** @param {string} message */
  constructor(message) {
    super(os.constants.errno.ENOTCONN, message);
    this.name = 'NotSupervisedError';
  }
}

/**
 * Throws for a negative errno `rc` of the C interface: NotSupervisedError for ENOTCONN,
 * ExtensionRuntimeError otherwise.
 * @param {number} rc 0 or a negative errno
 * @param {string} what the call, for the message
 */
function check(rc, what) {
  if (rc === 0) return;
  const errno = -rc;
  if (errno === os.constants.errno.ENOTCONN) {
    throw new NotSupervisedError(`${what}: not launched by extensiond, or extensiond is gone`);
  }
  throw new ExtensionRuntimeError(errno, `${what}: ${errnoNames.get(errno) || errno}`);
}

/**
 * @param {unknown} value
 * @param {string} what
 */
function requireFunction(value, what) {
  if (typeof value !== 'function') throw new TypeError(`${what} must be a function, not ${typeof value}`);
}

/**
 * @param {unknown} value
 * @param {string} what
 */
function requireString(value, what) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, not ${typeof value}`);
}

/**
 * Whether this process was launched by extensiond: it inherited a runtime channel, an AF_UNIX
 * SOCK_SEQPACKET socket named by $EXTENSIOND_CHANNEL_FD (removed from the environment when the
 * module was loaded).
 * @returns {boolean}
 */
function isSupervised() {
  return native.isSupervised();
}

/** A request a host began: its id, the extension's end of the channel to the host, and the calls that end it. */
class Request {
  /**
   * Made by the runtime for each request; not constructed by extensions.
   * @param {bigint} id
   * @param {number} fd the request channel's descriptor, which the Request owns
   */
  constructor(id, fd) {
    /** The request id (the host sees the same). @type {bigint} */
    this.id = id;
    /**
     * The connected stream socket to the host. Half-open: the host's end of input is 'end', and
     * the channel stays writable until the extension ends it (`channel.end()`), as in C and
     * Python the handler owns it and closes it. It has an 'error' listener that ignores errors
     * (a write after the host went away fails with EPIPE instead of ending the process; Node
     * ignores SIGPIPE): add your own to see them. While it is open it keeps the process alive.
     * @type {net.Socket}
     */
    this.channel = new net.Socket({ fd, readable: true, writable: true, allowHalfOpen: true });
    this.channel.on('error', () => {});
  }

  /**
   * Ends the request, returning `payload` to the host (Apple's completeRequest(returningItems:)):
   * a Buffer or other Uint8Array, or a string (sent as UTF-8). The request is then over, as if
   * the host had dismissed it; the channel stays open until ended. Throws TypeError for another
   * type, RangeError above REQUEST_MAX_PAYLOAD bytes (nothing is sent), NotSupervisedError
   * without extensiond.
   * @param {Buffer | Uint8Array | string} [payload]
   * @returns {void}
   */
  complete(payload = Buffer.alloc(0)) {
    let bytes;
    if (typeof payload === 'string') bytes = Buffer.from(payload, 'utf8');
    else if (payload instanceof Uint8Array) bytes = payload;
    else throw new TypeError(`complete: the result must be a Buffer, Uint8Array or string, not ${typeof payload}`);
    if (bytes.length > REQUEST_MAX_PAYLOAD) {
      throw new RangeError(`complete: the result is ${bytes.length} bytes, over the limit of ${REQUEST_MAX_PAYLOAD}`);
    }
    check(native.completeRequest(this.id, bytes), 'complete');
  }

  /**
   * Ends the request without a result, telling the host `reason` (Apple's
   * cancelRequest(withError:); cut at 4096 bytes). Throws TypeError for a reason that is not a
   * string or holds NUL (nothing is sent), NotSupervisedError without extensiond.
   * @param {string} reason
   * @returns {void}
   */
  cancel(reason) {
    requireString(reason, 'cancel: the reason');
    if (reason.includes('\0')) throw new TypeError('cancel: the reason must not contain NUL');
    check(native.cancelRequest(this.id, reason), 'cancel');
  }
}

/**
 * Announces readiness to extensiond and starts delivering requests to `onRequest`, once per
 * process; returns at once. `onRequest(request)` runs on the main thread for each request a host
 * begins. From then on the process stays alive, serving, until extensiond ends it. Throws
 * TypeError without an onRequest function, NotSupervisedError when the process was not launched
 * by extensiond, and ExtensionRuntimeError with code 'EALREADY' when it was started already
 * (nothing is sent; the first handler stays).
 * @param {{ onRequest: (request: Request) => void }} options
 * @returns {void}
 */
function start(options) {
  const onRequest = options && options.onRequest;
  requireFunction(onRequest, 'start: onRequest');
  const rc = native.start((id, fd) => onRequest(new Request(id, fd)));
  if (rc === -os.constants.errno.EALREADY) {
    throw new ExtensionRuntimeError(os.constants.errno.EALREADY, 'start: the runtime was started already');
  }
  check(rc, 'start');
}

/**
 * `reason` checked as the C interface would; throws TypeError or RangeError.
 * @param {unknown} reason
 * @param {string} what
 */
function checkReason(reason, what) {
  requireString(reason, `${what}: the reason`);
  if (reason.length === 0) throw new TypeError(`${what}: the reason must not be empty`);
  if (reason.includes('\0')) throw new TypeError(`${what}: the reason must not contain NUL`);
  const length = Buffer.byteLength(reason, 'utf8');
  if (length > ACTIVITY_MAX_REASON) {
    throw new RangeError(`${what}: the reason is ${length} bytes, over the limit of ${ACTIVITY_MAX_REASON}`);
  }
}

/**
 * Takes a task assertion held by extensiond, like ProcessInfo.performExpiringActivity:
 *
 * - granted: `block(false)` is called; the assertion is held until it returns or, when it
 *   returns a promise, until that promise settles (and until the expired call, if any, is over);
 * - about to expire: `block(true)` is called a second time, at most once, while the first call's
 *   promise may still be pending (it may be waiting for exactly this): stop the work and return
 *   (or settle) quickly;
 * - not granted (expiring, suspending, background time spent, too many assertions held, or no
 *   extensiond): `block(true)` only, at once.
 *
 * Calls come from the event loop, never during this call. A block that computes synchronously
 * holds the loop, and the expired call waits for it: do long work asynchronously. The process
 * stays alive until the activity is over. An exception thrown by the block, or a rejection of
 * its promise, is an uncaught exception once the assertion is released. Throws TypeError for a
 * reason that is not a string, is empty or holds NUL, RangeError for one over
 * ACTIVITY_MAX_REASON bytes of UTF-8 (the block is then never called).
 * @param {string} reason shown by `extctl status`
 * @param {(expired: boolean) => void | Promise<void>} block
 * @returns {void}
 */
function performExpiringActivity(reason, block) {
  checkReason(reason, 'performExpiringActivity');
  requireFunction(block, 'performExpiringActivity: the block');
  const rc = native.performExpiringActivity(reason, (expired, done) => {
    let result;
    try {
      result = block(expired);
    } catch (error) {
      done();
      throw error;
    }
    if (result && typeof result.then === 'function') {
      result.then(
        () => done(),
        (error) => {
          done();
          process.nextTick(() => {
            throw error;
          });
        },
      );
    } else {
      done();
    }
  });
  check(rc, 'performExpiringActivity');
}

/**
 * Runs `body` under a task assertion (Python's `expiring_activity`, Swift's
 * withExpiringActivity): waits for extensiond's answer, then calls `body(activity)`, holding the
 * assertion until its promise settles; resolves or rejects as `body` does. Granted:
 * `activity.granted` is true, and `activity.signal` (an AbortSignal) aborts when the assertion
 * is about to expire. Denied: `body` runs with `activity.granted` false and the signal already
 * aborted. Throws as performExpiringActivity.
 * @template T
 * @param {string} reason
 * @param {(activity: ExpiringActivity) => T | Promise<T>} body
 * @returns {Promise<T>}
 */
function expiringActivity(reason, body) {
  checkReason(reason, 'expiringActivity');
  requireFunction(body, 'expiringActivity: the body');
  return new Promise((resolve, reject) => {
    const controller = new AbortController();
    const activity = new ExpiringActivity(reason, controller.signal);
    let started = false;
    const run = () => {
      started = true;
      let outcome;
      try {
        outcome = Promise.resolve(body(activity));
      } catch (error) {
        outcome = Promise.reject(error);
      }
      outcome.then(resolve, reject);
      return outcome.then(
        () => {},
        () => {},
      );
    };
    performExpiringActivity(reason, (expired) => {
      if (!expired) {
        activity.granted = true;
        return run();
      }
      controller.abort();
      if (!started) run(); // denied: the body runs, told at once
      return undefined;
    });
  });
}

/** The activity given to expiringActivity's body. */
class ExpiringActivity {
  /**
   * @param {string} reason
   * @param {AbortSignal} signal
   */
  constructor(reason, signal) {
    /** The reason shown by `extctl status`. @type {string} */
    this.reason = reason;
    /** Whether an assertion was granted (false: denied, and `expired` is already true). @type {boolean} */
    this.granted = false;
    /** Aborted when the assertion is about to expire (or was never granted). @type {AbortSignal} */
    this.signal = signal;
  }

  /**
   * Whether the assertion is about to expire (or was never granted): stop and settle quickly.
   * @returns {boolean}
   */
  get expired() {
    return this.signal.aborted;
  }
}

const hintRule = "letters, digits, '.', '-', '_', at most 255 bytes, not starting or ending with '.', no '..'";

/**
 * Observes the notification hint `name`: `handler(name)` runs for each post made while the
 * process runs, and once for all the posts made while it was suspended, when it is resumed; a
 * hint never resumes or launches it. A name may have several handlers, called in the order
 * they were added. The handler alone does not keep the process alive. Throws TypeError for a
 * malformed name (letters, digits, '.', '-', '_', at most 255 bytes, not starting or ending with
 * '.', no '..'), NotSupervisedError without extensiond, ExtensionRuntimeError with code 'ENOSPC'
 * for a new name when OBSERVE_MAX_NAMES names are observed already.
 * @param {string} name
 * @param {(name: string) => void} handler
 * @returns {void}
 */
function observe(name, handler) {
  requireString(name, 'observe: the name');
  requireFunction(handler, 'observe: the handler');
  const problem = `bad hint name ${JSON.stringify(name)}: ${hintRule}`;
  if (name.includes('\0')) throw new TypeError(problem);
  const rc = native.observe(name, handler);
  if (rc === -os.constants.errno.EINVAL) throw new TypeError(problem);
  if (rc === -os.constants.errno.ENOSPC) {
    throw new ExtensionRuntimeError(os.constants.errno.ENOSPC, `observe: already observing ${OBSERVE_MAX_NAMES} names, the most one process may`);
  }
  check(rc, 'observe');
}

/**
 * Handles background refreshes: `handler(id)` runs when extensiond refreshes the extension
 * (its manifest's `refresh` schedule, or `extctl refresh`); answer with refreshComplete(id,
 * result) within the policy's refreshSeconds, or the refresh counts as failed. Call it before
 * start(). Throws NotSupervisedError without extensiond.
 * @param {(id: bigint) => void} handler
 * @returns {void}
 */
function onRefresh(handler) {
  requireFunction(handler, 'onRefresh: the handler');
  check(native.onRefresh(handler), 'onRefresh');
}

/**
 * Answers refresh `id` with a RefreshResult. Throws TypeError for another result,
 * NotSupervisedError without extensiond.
 * @param {bigint | number} id
 * @param {RefreshResult} result
 * @returns {void}
 */
function refreshComplete(id, result) {
  if (!Object.values(RefreshResult).includes(result)) {
    throw new TypeError(`refreshComplete: ${String(result)} is not a RefreshResult`);
  }
  check(native.refreshComplete(id, result), 'refreshComplete');
}

/**
 * Asks the system to open `url` for the extension (Apple's NSExtensionContext.open): the app
 * that declares its scheme, else the session's handler for it. Resolves true when extensiond
 * handed it over, false when it did not (no app or handler takes the scheme, the host's session
 * is locked, the point does not allow it, no open request, the rate limit; the reason is in
 * extensiond's journal) or when the channel closed first. Throws TypeError for a URL that is
 * empty or holds a control character, RangeError over URL_MAX bytes of UTF-8, NotSupervisedError
 * without extensiond.
 * @param {string} url
 * @returns {Promise<boolean>}
 */
function openURL(url) {
  requireString(url, 'openURL: the URL');
  if (url.length === 0 || /[\u0000-\u001f\u007f]/.test(url)) {
    throw new TypeError(`openURL: ${JSON.stringify(url)} is not a URL to open: empty, or holding a control character`);
  }
  const length = Buffer.byteLength(url, 'utf8');
  if (length > URL_MAX) throw new RangeError(`openURL: the URL is ${length} bytes, over the limit of ${URL_MAX}`);
  let answer;
  const opened = new Promise((resolve) => {
    answer = resolve;
  });
  const rc = native.openURL(url, (value) => answer(value));
  if (rc === -os.constants.errno.EINVAL) throw new TypeError(`openURL: ${JSON.stringify(url)} was refused as malformed`);
  if (rc === -os.constants.errno.EMSGSIZE) throw new RangeError(`openURL: the URL is over the limit of ${URL_MAX} bytes`);
  check(rc, 'openURL');
  return opened;
}

/**
 * The extension's own container, as extensiond passes it in $EXTENSIOND_CONTAINER: a directory
 * only it can read and write, kept across relaunches until `extctl reset`, and also its HOME.
 * null when that variable is unset or empty (not started by extensiond).
 * @returns {string | null}
 */
function containerPath() {
  return native.containerPath();
}

/**
 * The directory of the shared container `group`, as extensiond passes it in
 * $EXTENSION_SHARED_CONTAINER_<NAME> (NAME: `group` upper-cased, every byte other than an ASCII
 * letter or digit as '_'), or null when that variable is unset or empty. Throws TypeError when
 * `group` is not a string or holds NUL.
 * @param {string} group
 * @returns {string | null}
 */
function sharedContainerPath(group) {
  requireString(group, 'sharedContainerPath: the group');
  if (group.includes('\0')) throw new TypeError('sharedContainerPath: the group must not contain NUL');
  return native.sharedContainerPath(group);
}

// The C runtime reads (and removes) $EXTENSIOND_CHANNEL_FD on its first call: make it now, so
// that no child process started before the first runtime call inherits the variable.
native.isSupervised();
// Once 'exit' is emitted, no runtime thread may touch the thread-safe functions (they are
// finalized as the environment ends).
process.on('exit', () => native.close());

module.exports = {
  ACTIVITY_MAX_REASON,
  ExpiringActivity,
  ExtensionRuntimeError,
  NotSupervisedError,
  OBSERVE_MAX_NAMES,
  REQUEST_MAX_PAYLOAD,
  RefreshResult,
  Request,
  URL_MAX,
  containerPath,
  expiringActivity,
  isSupervised,
  observe,
  onRefresh,
  openURL,
  performExpiringActivity,
  refreshComplete,
  sharedContainerPath,
  start,
};
