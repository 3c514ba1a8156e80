/* lifecycle.c -- the process-wide stop flag, waiting and interruptible sleep. */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include "core.h"

volatile int pin_stopping;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;

void pin_request_stop(void)
{
	pthread_mutex_lock(&stop_mu);
	pin_stopping = 1;
	pthread_cond_broadcast(&stop_cv);
	pthread_mutex_unlock(&stop_mu);
}

void pin_wait_stop(void)
{
	pthread_mutex_lock(&stop_mu);
	while (!pin_stopping)
		pthread_cond_wait(&stop_cv, &stop_mu);
	pthread_mutex_unlock(&stop_mu);
}

int pin_sleep_ms(int ms)
{
	struct timespec dl;
	int stop;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&stop_mu);
	while (!pin_stopping &&
	       pthread_cond_timedwait(&stop_cv, &stop_mu, &dl) != ETIMEDOUT)
		;
	stop = pin_stopping;
	pthread_mutex_unlock(&stop_mu);
	return stop;
}


void pin_waiter_init(struct pin_waiter *w)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	w->stop = false;
}

void pin_waiter_destroy(struct pin_waiter *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

bool pin_waiter_sleep(struct pin_waiter *w, int ms)
{
	struct timespec ts;
	bool stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (!w->stop && !pin_stopping)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT)
			break;
	stop = w->stop || pin_stopping;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

bool pin_waiter_stopped(struct pin_waiter *w)
{
	bool stop;

	pthread_mutex_lock(&w->mu);
	stop = w->stop || pin_stopping;
	pthread_mutex_unlock(&w->mu);
	return stop;
}

void pin_waiter_stop(struct pin_waiter *w)
{
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}
