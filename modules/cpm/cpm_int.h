/* What the files of modules/cpm share among themselves (not for other modules). */
#pragma once
#include "modules/cpm/cpm_config.h"
#include "modules/cpm/cpm_files.h"
#include "modules/cpm/cpm_manifest.h"
#include "modules/cpm/cpm_pki.h"

/* `cpm certs check-expiration` / `cpm certs renew NAME|all` (argv[0] is the verb); returns the
 * exit code (0, 1 runtime failure, 2 usage error). */
int cpm_certs_run(const struct cpm_pki_input *in, int argc, char **argv);
