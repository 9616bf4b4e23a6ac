// Everything in the shim is static inline in include/cfuse.h; SwiftPM needs one source file.
#include "cfuse.h"
