// Types of extension-runtime, the Node.js runtime for extensiond extensions (docs/node.md).
/// <reference types="node" />
import type { Socket } from 'net';

/** The largest result Request.complete accepts, in bytes (EXT_REQUEST_MAX_PAYLOAD). */
export declare const REQUEST_MAX_PAYLOAD: number;
/** The longest reason an expiring activity accepts, in bytes of UTF-8 (EXT_ACTIVITY_MAX_REASON). */
export declare const ACTIVITY_MAX_REASON: number;
/** The most distinct names one process may observe (EXT_OBSERVE_MAX_NAMES). */
export declare const OBSERVE_MAX_NAMES: number;
/** The longest URL openURL accepts, in bytes of UTF-8 (EXT_URL_MAX). */
export declare const URL_MAX: number;

/** The answer to a background refresh (EXT_REFRESH_*). */
export declare const RefreshResult: Readonly<{
  /** New content was fetched: hosts showing the extension are told to redraw. */
  NEW_DATA: 0;
  /** Nothing changed. */
  NO_DATA: 1;
  /** The refresh failed: the next one is backed off. */
  FAILED: 2;
}>;
export type RefreshResult = (typeof RefreshResult)[keyof typeof RefreshResult];

/** A call into the runtime failed: `errno` is the error number the C interface returned, `code` its name. */
export declare class ExtensionRuntimeError extends Error {
  constructor(errno: number, message: string);
  /** The error number (positive), e.g. os.constants.errno.EALREADY. */
  readonly errno: number;
  /** The error's name, e.g. 'EALREADY'. */
  readonly code: string;
}

/** The process was not launched by extensiond (or its channel to extensiond is closed): ENOTCONN. */
export declare class NotSupervisedError extends ExtensionRuntimeError {
  constructor(message: string);
}

/** A request a host began: its id, the extension's end of the channel to the host, and the calls that end it. */
export declare class Request {
  private constructor(id: bigint, fd: number);
  /** The request id (the host sees the same). */
  readonly id: bigint;
  /**
   * The connected stream socket to the host, half-open: the host's end of input is 'end', and
   * the channel stays writable until the extension ends it. Errors are ignored unless you listen
   * for 'error'. While it is open it keeps the process alive.
   */
  readonly channel: Socket;
  /**
   * Ends the request, returning `payload` (a string is sent as UTF-8) to the host. Throws
   * RangeError above REQUEST_MAX_PAYLOAD bytes, NotSupervisedError without extensiond.
   */
  complete(payload?: Uint8Array | string): void;
  /** Ends the request without a result, telling the host `reason` (cut at 4096 bytes). */
  cancel(reason: string): void;
}

export interface StartOptions {
  /** Called on the main thread for each request a host begins. */
  onRequest: (request: Request) => void;
}

/**
 * Announces readiness to extensiond and starts delivering requests, once per process. The
 * process then serves until extensiond ends it. Throws NotSupervisedError without extensiond,
 * ExtensionRuntimeError with code 'EALREADY' when started already.
 */
export declare function start(options: StartOptions): void;

/** Whether this process was launched by extensiond. */
export declare function isSupervised(): boolean;

/**
 * Takes a task assertion: `block(false)` when granted, held until it returns or its promise
 * settles; `block(true)` a second time, at most once, when it is about to expire (stop quickly);
 * `block(true)` only, at once, when not granted. Throws TypeError or RangeError for a bad reason.
 */
export declare function performExpiringActivity(reason: string, block: (expired: boolean) => void | Promise<void>): void;

/** The activity given to expiringActivity's body. */
export declare class ExpiringActivity {
  private constructor(reason: string, signal: AbortSignal);
  /** The reason shown by `extctl status`. */
  readonly reason: string;
  /** Whether an assertion was granted (false: denied, and `expired` is already true). */
  readonly granted: boolean;
  /** Aborted when the assertion is about to expire (or was never granted). */
  readonly signal: AbortSignal;
  /** Whether the assertion is about to expire (or was never granted). */
  readonly expired: boolean;
}

/**
 * Runs `body` under a task assertion, held until its promise settles; resolves or rejects as
 * `body` does. Denied: `body` runs with `granted` false and the signal already aborted.
 */
export declare function expiringActivity<T>(reason: string, body: (activity: ExpiringActivity) => T | Promise<T>): Promise<T>;

/**
 * Observes the notification hint `name`: `handler(name)` for each post (once for all the posts
 * made while suspended). Throws TypeError for a malformed name, ExtensionRuntimeError with code
 * 'ENOSPC' past OBSERVE_MAX_NAMES names, NotSupervisedError without extensiond.
 */
export declare function observe(name: string, handler: (name: string) => void): void;

/** Handles background refreshes: answer each with refreshComplete(id, result). Call it before start(). */
export declare function onRefresh(handler: (id: bigint) => void): void;

/** Answers refresh `id`. */
export declare function refreshComplete(id: bigint | number, result: RefreshResult): void;

/** Asks the system to open `url` for the extension; resolves whether extensiond handed it over. */
export declare function openURL(url: string): Promise<boolean>;

/** The extension's own container ($EXTENSIOND_CONTAINER, also its HOME), or null. */
export declare function containerPath(): string | null;

/** The directory of the shared container `group` ($EXTENSION_SHARED_CONTAINER_<NAME>), or null. */
export declare function sharedContainerPath(group: string): string | null;
