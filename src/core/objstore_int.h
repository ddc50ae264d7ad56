/* objstore_int.h - what objstore.c (the mirror, HTTP, credentials) and the services' files
 * (objstore_s3.c, objstore_gcs.c: their URLs, listings and errors) share. */
#ifndef NR_OBJSTORE_INT_H
#define NR_OBJSTORE_INT_H

#include "objstore.h"

#include "../common/buf.h"
#include "../common/json.h"
#include "../common/strmap.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

/* One object of a listing. */
typedef struct {
    char *key;  /* the whole key */
    char *etag; /* what changes when the object does (S3 ETag, GCS generation) */
} nr_os_obj_t;

/* A listing: objects, and with a delimiter the common prefixes ("<path>/<model>/"). */
typedef struct {
    nr_os_obj_t *objs;
    size_t n_objs;
    char **prefixes;
    size_t n_prefixes;
} nr_os_list_t;

typedef struct nr_os_service_s nr_os_service_t;

struct nr_objstore_s {
    const nr_os_service_t *svc;
    char *url;      /* as given */
    char *endpoint; /* scheme://host[:port], no trailing '/' */
    char *bucket;
    char *base;     /* the object prefix of the repository: "" or "path/" */
    char *dir;      /* the local directory */
    /* S3: access key, secret, session token (NULL: none), region */
    char *key_id, *secret, *token, *region;
    char *sigv4; /* "aws:amz:<region>:s3" */
    /* GCS: the credentials' JSON (NULL: anonymous) and the access token they give */
    char *gcs_cred;
    char *bearer;        /* "Authorization: Bearer <token>" */
    int64_t bearer_until; /* CLOCK_REALTIME seconds the token is good until (with margin) */
    pthread_mutex_t mu;
    CURL *curl;
    /* what the local files were downloaded from: path relative to dir -> etag */
    nr_strmap_t etag_of;
    char **rel, **etag; /* [n_files]: map keys and values (etag NULL: file gone) */
    size_t n_files;
};

struct nr_os_service_s {
    const char *scheme; /* "s3://" */
    const char *name;   /* "S3" */
    /* The rest of the URL after the scheme: endpoint, bucket, base; credentials. */
    nr_status_t *(*init)(nr_objstore_t *s, const char *rest);
    /* The URL of one page of the listing of prefix (token: the page, NULL the first). */
    char *(*list_url)(const nr_objstore_t *s, const char *prefix, bool delimiter,
                      const char *token);
    /* One page's body into *out (appending); *next: the next page's token or NULL. */
    nr_status_t *(*list_parse)(const nr_objstore_t *s, const char *body, size_t len,
                               nr_os_list_t *out, char **next);
    /* The URL that downloads object `key`. */
    char *(*object_url)(const nr_objstore_t *s, const char *key);
    /* The error of a failed request from its status and body (the service's code and text). */
    char *(*error_text)(long status, const char *body, size_t len);
    /* Authenticates a request being set up on c (lock held): options and headers (*h, sent
     * with the request). NULL when the service's requests are anonymous. */
    nr_status_t *(*authorize)(nr_objstore_t *s, CURL *c, struct curl_slist **h);
};

extern const nr_os_service_t nr_os_s3, nr_os_gcs;

/* `s` with every byte outside RFC 3986's unreserved set percent-encoded ('/' kept when
 * keep_slash). */
char *nr_os_escape(const char *s, bool keep_slash);
/* The credential file's entry for s->url (TRITON_CLOUD_CREDENTIAL_PATH): the value under
 * `section` ("s3", "gs") whose key is the longest prefix of the URL ("" matches any), in *val;
 * false when there is none. The file's text goes into *text and its document into *doc, both
 * for the caller to free (nr_buf_free, nr_json_free) once it has copied what it needs. */
bool nr_os_credential(const nr_objstore_t *s, const char *section, nr_buf_t *text,
                      nr_json_doc_t **doc, const nr_jv_t **val);
/* Triton's CleanPath: p without leading or trailing '/' and none doubled (to free). */
char *nr_os_clean_path(const char *p);
/* s->bucket and s->base from a clean "bucket[/object path]"; INTERNAL "No bucket name found
 * in path: <url>" when the bucket is empty. */
NR_MUST_CHECK nr_status_t *nr_os_locate(nr_objstore_t *s, const char *path);
/* A copy of a JSON string value; NULL when v is NULL or not a string. */
char *nr_os_jv_string(const nr_jv_t *v);
/* An access token for Cloud Storage (read-only scope) from Google credentials json[0..len)
 * (a service account's key or an authorized user's refresh token), and for how many seconds
 * it is good. objstore_gauth.c. */
NR_MUST_CHECK nr_status_t *nr_os_google_token(const char *json, size_t len, char **token,
                                              int64_t *ttl);

#endif
