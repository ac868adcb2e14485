/* aotc runtime: status strings. The only runtime code a bundle links. */
#include "aotc_runtime.h"

/* Weak: every bundle ships a copy of this file, so an image with two bundles may compile two
   copies (Zephyr links its libraries whole, Arduino compiles every file); the linker keeps one
   definition instead of reporting a clash. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((weak))
#endif
const char *aotc_status_str(int status)
{
    switch (status) {
    case AOTC_OK:
        return "ok";
    case AOTC_ERR_NULL_POINTER:
        return "null pointer argument";
    case AOTC_ERR_ARENA_TOO_SMALL:
        return "arena too small";
    case AOTC_ERR_ARENA_MISALIGNED:
        return "arena misaligned";
    case AOTC_ERR_BACKEND:
        return "a BYOC kernel (external library) returned an error";
    default:
        return "unknown status";
    }
}
