#include "ops/cpu/cpu_kernels.h"
