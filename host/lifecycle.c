/* lifecycle.c -- the process-wide stop flag, waiting and interruptible sleep. */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include "host.h"

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

