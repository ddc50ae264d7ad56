/* http_conn.h - what http_server.c calls in http_conn.c with libmicrohttpd's
 * types (the rest of http_conn.c is declared in http_int.h, which handlers
 * include and which stays free of libmicrohttpd).
 */
#ifndef NR_HTTP_CONN_H
#define NR_HTTP_CONN_H

#include <microhttpd.h>
#include <stdbool.h>

/* MHD_OPTION_NOTIFY_CONNECTION, cls = the server: counts the connection,
 * refuses it past --http-max-connections (503, one log line per burst) and
 * lists it for the sweeper. */
void nr_http_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe);

/* A request on c is being answered (true) or is done (false): the sweeper
 * leaves such a connection alone, since a client may half-close after its
 * request and still read the answer. */
void nr_http_conn_busy(struct MHD_Connection *c, bool busy);

/* The libmicrohttpd reply that sends stream st as it is written (http_stream.c); it takes the
 * reply's reference on st (dropped too when this fails: NULL). */
struct nr_http_stream_s;
struct MHD_Response *nr_http_stream_response(struct nr_http_stream_s *st,
                                             struct MHD_Connection *c);

#endif
