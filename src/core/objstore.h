/* objstore.h - model repositories in object storage: `s3://[http(s)://host:port/]bucket/path`
 * (Amazon S3 or an S3-compatible server) and `gs://bucket/path` (Google Cloud Storage), as
 * Triton accepts them for --model-repository.
 *
 * A store mirrors the repository into a local directory of its own (under $TMPDIR, removed
 * when the store closes) and the repository reads that directory like any other: the model
 * names come from the bucket (nr_objstore_models), and before a model loads its directory is
 * brought up to date (nr_objstore_sync): objects new or changed since the last sync (by their
 * ETag) are downloaded, files whose object went are deleted, and nothing unchanged is touched,
 * so the repository's modification-time test tells a changed model from an unchanged one as it
 * does on a local disk. HTTP is libcurl's; S3 requests are signed with AWS Signature Version 4
 * by libcurl (CURLOPT_AWS_SIGV4).
 *
 * Credentials, as Triton reads them: S3 from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN and AWS_DEFAULT_REGION, or from the JSON file TRITON_CLOUD_CREDENTIAL_PATH
 * names ({"s3": {"<path prefix>" or "": {"key_id", "secret_key", "region", "session_token"}}},
 * the longest prefix of the repository path winning, and it winning over the environment); GCS
 * anonymously, against the emulator CLOUD_STORAGE_EMULATOR_ENDPOINT or STORAGE_EMULATOR_HOST
 * names when set. `as://` (Azure) is refused with a clear message.
 *
 * Threads: a store's calls are serialized by its own lock (one connection, reused).
 */
#ifndef NR_OBJSTORE_H
#define NR_OBJSTORE_H

#include "../common/status.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct nr_objstore_s nr_objstore_t;

/* Whether `path` names object storage (s3://, gs://, as://) rather than a local directory. */
bool nr_objstore_is_url(const char *path);

/* Opens the repository `url`: parses it, finds its credentials, checks that its bucket can be
 * listed, and makes the local directory. Errors (INTERNAL) say what failed, with the service's
 * error code and message. */
NR_MUST_CHECK nr_status_t *nr_objstore_open(const char *url, nr_objstore_t **out);
/* Removes the local directory. */
void nr_objstore_close(nr_objstore_t *s);

/* The local directory the repository reads (<dir>/<model>/...). */
const char *nr_objstore_dir(const nr_objstore_t *s);

/* The model directories in the bucket now (names to free, each and the array). */
NR_MUST_CHECK nr_status_t *nr_objstore_models(nr_objstore_t *s, char ***names, size_t *n);

/* Brings <dir>/<model> up to date with the bucket; a model with no object left has no local
 * directory afterwards. On an error the local files are as the last sync left them, except
 * for the objects downloaded whole before it. */
NR_MUST_CHECK nr_status_t *nr_objstore_sync(nr_objstore_t *s, const char *model);

#endif
