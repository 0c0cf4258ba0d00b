/*
 * postern_native: the only native code in postern (SPEC §2). It does three
 * things that Node has no API for, and nothing else:
 *
 *   peerCred(fd)     getsockopt(fd, SOL_SOCKET, SO_PEERCRED) -> { pid, uid, gid }
 *   setNonDumpable() prctl(PR_SET_DUMPABLE, 0)
 *   pidfdOpen(pid)   pidfd_open(pid, 0) -> fd, or null when the kernel lacks it
 *
 * Plain C against node_api.h, no C++ wrappers, no allocation, no state.
 * Failures throw an Error whose code is the errno name (e.g. "ESRCH") and
 * whose message names the call; bad arguments throw TypeError / RangeError.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <node_api.h>

/* Throws an Error for the errno `err` after `call` failed. Returns NULL so
 * callers can `return throw_errno(...)`. */
static napi_value throw_errno(napi_env env, const char *call, int err) {
  char message[160];
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
  const char *name = strerrorname_np(err);
#else
  const char *name = NULL; /* libc without strerrorname_np (musl) */
#endif
  snprintf(message, sizeof message, "%s failed: %s", call, strerror(err));
  napi_throw_error(env, name != NULL ? name : "EUNKNOWN", message);
  return NULL;
}

/* Reads argument 0 as an integer in [min, max]. On failure a TypeError or
 * RangeError is pending and 0 is returned. Doubles are checked rather than
 * truncated by napi_get_value_int32, so 3.5 or NaN can never become an fd. */
static int int_arg(napi_env env, napi_callback_info info, const char *fn,
                   const char *name, double min, double max, int *out) {
  size_t argc = 1;
  napi_value arg;
  napi_valuetype type;
  double value;
  char message[128];

  if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) != napi_ok) {
    napi_throw_error(env, NULL, "postern_native: cannot read arguments");
    return 0;
  }
  if (argc < 1 || napi_typeof(env, arg, &type) != napi_ok || type != napi_number) {
    snprintf(message, sizeof message, "%s: %s must be a number", fn, name);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return 0;
  }
  napi_get_value_double(env, arg, &value);
  if (!isfinite(value) || floor(value) != value || value < min || value > max) {
    snprintf(message, sizeof message, "%s: %s must be an integer from %.0f to %.0f",
             fn, name, min, max);
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", message);
    return 0;
  }
  *out = (int)value;
  return 1;
}

static void set_number(napi_env env, napi_value obj, const char *key, double v) {
  napi_value num;
  napi_create_double(env, v, &num);
  napi_set_named_property(env, obj, key, num);
}

static napi_value peer_cred(napi_env env, napi_callback_info info) {
  int fd;
  struct ucred cred;
  socklen_t len = sizeof cred;
  napi_value result;

  if (!int_arg(env, info, "peerCred", "fd", 0, 2147483647.0, &fd)) return NULL;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);
  if (len != sizeof cred) {
    napi_throw_error(env, "ESHORT", "getsockopt(SO_PEERCRED) returned a short struct ucred");
    return NULL;
  }
  napi_create_object(env, &result);
  set_number(env, result, "pid", (double)cred.pid);
  set_number(env, result, "uid", (double)cred.uid);
  set_number(env, result, "gid", (double)cred.gid);
  return result;
}

static napi_value set_non_dumpable(napi_env env, napi_callback_info info) {
  napi_value undefined;
  (void)info;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return throw_errno(env, "prctl(PR_SET_DUMPABLE, 0)", errno);
  napi_get_undefined(env, &undefined);
  return undefined;
}

static napi_value pidfd_open(napi_env env, napi_callback_info info) {
  int pid;
  napi_value result;

  if (!int_arg(env, info, "pidfdOpen", "pid", 1, 2147483647.0, &pid)) return NULL;
#ifdef SYS_pidfd_open
  {
    long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd >= 0) {
      napi_create_int32(env, (int32_t)fd, &result);
      return result;
    }
    if (errno != ENOSYS) return throw_errno(env, "pidfd_open", errno);
  }
#endif
  /* The kernel (or the headers this was built with) lack pidfd_open. */
  napi_get_null(env, &result);
  return result;
}

NAPI_MODULE_INIT() {
  static const struct {
    const char *name;
    napi_callback fn;
  } table[] = {
    {"peerCred", peer_cred},
    {"setNonDumpable", set_non_dumpable},
    {"pidfdOpen", pidfd_open},
  };
  size_t i;
  for (i = 0; i < sizeof table / sizeof table[0]; i++) {
    napi_value fn;
    if (napi_create_function(env, table[i].name, NAPI_AUTO_LENGTH, table[i].fn, NULL, &fn) != napi_ok ||
        napi_set_named_property(env, exports, table[i].name, fn) != napi_ok)
      return NULL;
  }
  return exports;
}
